package config

import (
	"errors"
	"testing"

	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
)

// FuzzLoad: the config parser never panics; what it accepts names only
// known runtimes, and what it refuses is an ErrInvalid naming the file.
func FuzzLoad(f *testing.F) {
	for _, s := range []string{
		"defaultRuntime: k8s\nruntimes:\n  k8s: {context: \"\", namespace: default}\n  k3s: {context: k3s-default, namespace: ai}\n",
		"", "---\n", "runtimes: {docker: {}}\n", "defaultRuntime: [a]\n", "runtimes:\n  k8s:\n    namespace: 123\n",
		"a: &x {b: *x}\n", "runtimes: {k8s: {context: a, context: b}}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := parse("fuzz.yaml", data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error does not wrap ErrInvalid: %v", err)
			}
			return
		}
		if c.DefaultRuntime != "" && !runtimeid.IsRuntime(c.DefaultRuntime) {
			t.Fatalf("accepted defaultRuntime %q", c.DefaultRuntime)
		}
		for name := range c.Runtimes {
			if !runtimeid.IsRuntime(name) {
				t.Fatalf("accepted runtime %q", name)
			}
		}
	})
}
