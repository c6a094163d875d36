//go:build tools

// Package krew pins the krew release used to check the plugin's krew manifest
// and to install a release archive the way users will. It is a module of its
// own so that krew's old dependencies never enter the plugin's go.mod.
// go.mod raises github.com/modern-go/reflect2 to v1.0.2: the v1.0.1 that krew
// v0.4.3 asks for crashes at run time on Go 1.18 and later.
package krew

import (
	_ "sigs.k8s.io/krew/cmd/krew"
	_ "sigs.k8s.io/krew/cmd/validate-krew-manifest"
)
