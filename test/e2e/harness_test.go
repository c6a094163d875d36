package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestHarness checks what every other test takes for granted: the kubectl on PATH is the one built
// with the control plane, and it finds the freshly built plugin.
func TestHarness(t *testing.T) {
	requireCluster(t)

	t.Run("kubectl is the built one", func(t *testing.T) {
		got, err := exec.LookPath("kubectl")
		if err != nil {
			t.Fatal(err)
		}
		if want := filepath.Join(harness.testbin, "kubectl"); got != want {
			t.Errorf("kubectl on PATH = %s, want %s", got, want)
		}
	})

	t.Run("kubectl discovers the plugin", func(t *testing.T) {
		r := run(t, "--help")
		if r.code != 0 {
			t.Fatalf("kubectl gobrave --help: %s", r)
		}
		if !strings.Contains(r.stdout+r.stderr, "gobrave") {
			t.Errorf("kubectl gobrave --help does not mention gobrave: %s", r)
		}
		list := kubectl(t, "plugin", "list", "--name-only")
		if !strings.Contains(list.stdout, "kubectl-gobrave") {
			t.Errorf("kubectl plugin list does not show kubectl-gobrave: %s", list)
		}
	})
}
