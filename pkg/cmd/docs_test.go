package cmd_test

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/gobrave/kubectl-gobrave/pkg/gendocs"
)

// docsDir is the committed command reference, relative to this package.
const docsDir = "../../docs/cli"

// TestDocsUpToDate regenerates the command reference from the live command
// tree and fails, naming each stale page, when docs/cli differs: a new verb,
// flag or help text must come with `make docs`.
func TestDocsUpToDate(t *testing.T) {
	gen := t.TempDir()
	if err := gendocs.GenMarkdownDocs(gen); err != nil {
		t.Fatalf("GenMarkdownDocs: %v", err)
	}
	want := pages(t, gen)
	if len(want) == 0 {
		t.Fatal("GenMarkdownDocs wrote no page")
	}
	have := pages(t, docsDir)

	for _, name := range sortedKeys(want) {
		got, ok := have[name]
		switch {
		case !ok:
			t.Errorf("docs/cli/%s is missing: run make docs", name)
		case !bytes.Equal(got, want[name]):
			t.Errorf("docs/cli/%s is stale (%s): run make docs", name, firstDifference(got, want[name]))
		}
	}
	for _, name := range sortedKeys(have) {
		if _, ok := want[name]; !ok {
			t.Errorf("docs/cli/%s documents a command that no longer exists: run make docs", name)
		}
	}
}

// TestGenMarkdownDocsIsStable checks that two runs in different environments
// give the same pages, with nothing of the machine in them.
func TestGenMarkdownDocsIsStable(t *testing.T) {
	a := t.TempDir()
	if err := gendocs.GenMarkdownDocs(a); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", "/somewhere/else")
	t.Setenv("KUBECACHEDIR", "/var/cache/elsewhere")
	t.Setenv("GOBRAVE_HOME", "/var/gobrave")
	b := t.TempDir()
	// A page of a command that does not exist is removed.
	if err := os.WriteFile(filepath.Join(b, "kubectl_gobrave_gone.md"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := gendocs.GenMarkdownDocs(b); err != nil {
		t.Fatal(err)
	}
	pa, pb := pages(t, a), pages(t, b)
	if _, ok := pb["kubectl_gobrave_gone.md"]; ok {
		t.Error("the page of a command that does not exist was kept")
	}
	if len(pa) != len(pb) {
		t.Errorf("%d pages, then %d", len(pa), len(pb))
	}
	home, _ := os.UserHomeDir()
	for name, body := range pa {
		if !bytes.Equal(body, pb[name]) {
			t.Errorf("%s differs between runs: %s", name, firstDifference(pb[name], body))
		}
		for _, leak := range []string{home, "/somewhere/else", "/var/cache/elsewhere", "Auto generated"} {
			if len(leak) > len("/root") && bytes.Contains(body, []byte(leak)) {
				t.Errorf("%s contains %q", name, leak)
			}
		}
	}
}

// pages reads the generated pages (kubectl_gobrave*.md) of dir by file name.
func pages(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "kubectl_gobrave*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(p)] = b
	}
	return out
}

func sortedKeys(m map[string][]byte) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// firstDifference describes the first line where got and want differ.
func firstDifference(got, want []byte) string {
	g := strings.Split(string(got), "\n")
	w := strings.Split(string(want), "\n")
	for i := 0; i < max(len(g), len(w)); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return "line " + strconv.Itoa(i+1) + ": committed " + strconv.Quote(short(gl)) + ", generated " + strconv.Quote(short(wl))
		}
	}
	return "same lines"
}

func short(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
