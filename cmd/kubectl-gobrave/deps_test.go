package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestBinaryLeavesOutDocGenerators: the plugin's binary does not link the
// command reference generator (cobra/doc with go-md2man and blackfriday):
// every package linked runs its initialisation at the start of every
// command, and blackfriday's alone took 1.6-2.1 ms (GODEBUG=inittrace=1),
// for a function only `make docs` calls (pkg/gendocs).
func TestBinaryLeavesOutDocGenerators(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the binary's packages")
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		switch {
		case p == "github.com/spf13/cobra/doc",
			strings.HasPrefix(p, "github.com/cpuguy83/go-md2man"),
			strings.HasPrefix(p, "github.com/russross/blackfriday"):
			t.Errorf("the plugin links %s", p)
		}
	}
}
