//go:build tools

// Package k9s pins the k9s version the repository's plugins.yaml is written for and tested
// against (build.sh builds it; plugins_test.go validates ../../plugins.yaml against its schema).
// A module of its own, so k9s's dependencies stay out of the plugin's go.mod.
package k9s

import _ "github.com/derailed/k9s"
