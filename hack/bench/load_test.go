package main

import (
	"fmt"
	"testing"
)

// The load spreads evenly: each namespace holds perNS objects, both kinds, and its share of the
// running slice; at or below perNS (and with -per-namespace 0) everything stays in namespace bench.
func TestLoadNamespaces(t *testing.T) {
	for _, c := range []struct {
		l       loadShape
		nss     int
		first   string
		perNS   int // objects in each namespace
		running int // running workloads in each namespace
	}{
		{loadShape{n: 1000, running: 1000, perNS: 1000}, 1, "bench", 1000, 1000},
		{loadShape{n: 10000, running: 1000, perNS: 0}, 1, "bench", 10000, 1000},
		{loadShape{n: 10000, running: 1000, perNS: 1000}, 10, "bench-000", 1000, 100},
		{loadShape{n: 100000, running: 1000, perNS: 1000}, 100, "bench-000", 1000, 10},
	} {
		t.Run(fmt.Sprint(c.l), func(t *testing.T) {
			nss := c.l.namespaces()
			if len(nss) != c.nss || nss[0] != c.first {
				t.Fatalf("namespaces %d from %s, want %d from %s", len(nss), nss[0], c.nss, c.first)
			}
			specs, runs := c.l.specs()
			if len(specs) != c.l.n {
				t.Fatalf("%d specs, want %d", len(specs), c.l.n)
			}
			objs, running := map[string]int{}, map[string]int{}
			kinds := map[string]map[string]int{}
			for i, s := range specs {
				objs[s.RuntimeNamespace]++
				if runs[i] {
					running[s.RuntimeNamespace]++
				}
				if kinds[s.RuntimeNamespace] == nil {
					kinds[s.RuntimeNamespace] = map[string]int{}
				}
				kinds[s.RuntimeNamespace][s.Kind()]++
			}
			for _, ns := range nss {
				if objs[ns] != c.perNS || running[ns] != c.running || kinds[ns]["deployment"] != c.perNS/2 {
					t.Errorf("namespace %s: %d objects (%v), %d running; want %d, half deployments, %d running", ns, objs[ns], kinds[ns], running[ns], c.perNS, c.running)
				}
			}
			if len(objs) != len(nss) {
				t.Errorf("objects in %d namespaces, want %d", len(objs), len(nss))
			}
		})
	}
}
