// Command gendocs writes the command reference, one Markdown page per
// command, into the folder given (docs/cli for `make docs`):
//
//	go run ./hack/gendocs docs/cli
//
// The pages come from the live cobra tree through gendocs.GenMarkdownDocs, the
// same function pkg/cmd's TestDocsUpToDate uses to find a stale docs/cli.
package main

import (
	"fmt"
	"os"

	"github.com/gobrave/kubectl-gobrave/pkg/gendocs"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go run ./hack/gendocs DIR")
		os.Exit(2)
	}
	if err := gendocs.GenMarkdownDocs(os.Args[1]); err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(1)
	}
}
