// Package holdenv is the environment file `hack/bench -hold` writes for
// experiments by hand on its cluster (KUBECONFIG, HOME, ..., TEMPLATE_DB),
// and its reading by the tools that run the plugin there (hack/recmem,
// hack/monreal): one format, written and read in one place.
package holdenv

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Format renders env (K=V entries) as `export K="V"` lines, V quoted as Go
// (and POSIX shells, for the plain paths and words it holds) read it.
func Format(env []string) []byte {
	var b strings.Builder
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		fmt.Fprintf(&b, "export %s=%q\n", k, v)
	}
	return []byte(b.String())
}

// Parse reads the `export K="V"` lines of b as K=V entries; lines without
// a name are skipped.
func Parse(b []byte) []string {
	var env []string
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "export "))
		k, v, ok := strings.Cut(line, "=")
		if !ok || k == "" {
			continue
		}
		if uq, err := strconv.Unquote(v); err == nil {
			v = uq
		}
		env = append(env, k+"="+v)
	}
	return env
}

// Read reads the file at path: its entries, and its TEMPLATE_DB (the
// database of the load's records), which it must have.
func Read(path string) (env []string, template string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	env = Parse(b)
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "TEMPLATE_DB="); ok {
			template = v
		}
	}
	if template == "" {
		return nil, "", fmt.Errorf("%s has no TEMPLATE_DB", path)
	}
	return env, template, nil
}
