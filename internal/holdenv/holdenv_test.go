package holdenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// What hack/bench writes, the tools read back, quotes and spaces included.
func TestRoundTrip(t *testing.T) {
	env := []string{"KUBECONFIG=/tmp/a b/kubeconfig", `HOME=/tmp/"h"`, "EMPTY=", "TEMPLATE_DB=/tmp/t.db"}
	path := filepath.Join(t.TempDir(), "hold.env")
	if err := os.WriteFile(path, Format(env), 0o600); err != nil {
		t.Fatal(err)
	}
	got, template, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(env, got); d != "" {
		t.Errorf("env (-want +got):\n%s", d)
	}
	if template != "/tmp/t.db" {
		t.Errorf("template %q, want /tmp/t.db", template)
	}
}

func TestReadNeedsTemplate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hold.env")
	if err := os.WriteFile(path, Format([]string{"KUBECONFIG=/k"}), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Read(path); err == nil || !strings.Contains(err.Error(), "has no TEMPLATE_DB") {
		t.Fatalf("err = %v, want no TEMPLATE_DB", err)
	}
}
