package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestClusterDownLeavesUnmarkedFolders (issue 14, item 9): hack/cluster-down.sh deletes only a
// work folder hack/cluster-up.sh made (it carries the .gobrave-cluster-workdir marker), not a
// folder of the user's that merely holds a cluster.env, as GOBRAVE_CLUSTER_DIR could name.
func TestClusterDownLeavesUnmarkedFolders(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	down := func(dir string) string {
		t.Helper()
		out, err := exec.Command(filepath.Join(root, "hack", "cluster-down.sh"), dir).CombinedOutput()
		if err != nil {
			t.Fatalf("cluster-down.sh %s: %v\n%s", dir, err, out)
		}
		return string(out)
	}
	mine := t.TempDir()
	for name, content := range map[string]string{"cluster.env": "GOBRAVE_CLUSTER_NAME=\n", "thesis.tex": "years of work"} {
		if err := os.WriteFile(filepath.Join(mine, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if out := down(mine); !strings.Contains(out, "not removing") {
		t.Errorf("cluster-down.sh on an unmarked folder said %q", out)
	}
	if _, err := os.Stat(filepath.Join(mine, "thesis.tex")); err != nil {
		t.Fatalf("cluster-down.sh removed a folder without its marker: %v", err)
	}

	made := t.TempDir()
	for _, name := range []string{"cluster.env", ".gobrave-cluster-workdir"} {
		if err := os.WriteFile(filepath.Join(made, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	down(made)
	if _, err := os.Stat(made); !os.IsNotExist(err) {
		t.Errorf("cluster-down.sh left its own marked folder: %v", err)
	}
}
