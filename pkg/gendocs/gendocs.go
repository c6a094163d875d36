// Package gendocs writes the plugin's command reference. It is a package of
// its own, not part of pkg/cmd, so that the plugin's binary does not link
// cobra/doc and its Markdown and man page renderers (go-md2man,
// blackfriday), whose package initialisation ran at the start of every
// command (GODEBUG=inittrace=1: blackfriday alone 1.6-2.1 ms) for a
// function only `make docs` and the tests call.
package gendocs

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/gobrave/kubectl-gobrave/pkg/cmd"
)

// Fixed stand-ins for what the reference pages would otherwise take from the
// machine that generates them, so that docs/cli is the same everywhere.
const (
	docsHome     = "/home/user"
	docsCacheDir = "$HOME/.kube/cache"
)

// docsPagePrefix starts the file name of every generated page.
const docsPagePrefix = "kubectl_gobrave"

// GenMarkdownDocs writes one Markdown page per command of the tree
// (kubectl_gobrave.md, kubectl_gobrave_create.md, ...) into dir with
// cobra/doc, creating dir when missing and removing the pages of commands
// that no longer exist. The output depends on the command tree alone: no
// generation date, no home folder, no $KUBECACHEDIR. `make docs` runs it
// through hack/gendocs; TestDocsUpToDate compares its output with docs/cli.
func GenMarkdownDocs(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	old, err := filepath.Glob(filepath.Join(dir, docsPagePrefix+"*.md"))
	if err != nil {
		return err
	}
	for _, p := range old {
		if err := os.Remove(p); err != nil {
			return fmt.Errorf("remove stale page: %w", err)
		}
	}

	f := cmd.NewFactory()
	f.Home = docsHome
	f.Getenv = func(string) string { return "" }
	// The kubeconfig flags' default cache folder is $KUBECACHEDIR or
	// ~/.kube/cache of whoever runs this; print it as kubectl's docs do.
	*f.ConfigFlags.CacheDir = docsCacheDir
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.Discard}
	root := cmd.NewCmdRoot(f, streams)
	disableAutoGenTag(root)
	if err := doc.GenMarkdownTree(root, dir); err != nil {
		return fmt.Errorf("generate the command reference in %s: %w", dir, err)
	}
	return nil
}

// disableAutoGenTag drops cobra's "Auto generated ... on <date>" footer from
// every page, so that the output does not change from day to day.
func disableAutoGenTag(c *cobra.Command) {
	c.DisableAutoGenTag = true
	for _, sub := range c.Commands() {
		disableAutoGenTag(sub)
	}
}
