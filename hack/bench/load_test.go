package main

import (
	"fmt"
	"testing"
)

// The load spreads evenly: each namespace holds N/K objects, half of each kind; the running slice
// is spread one pair a namespace, round robin; with one namespace everything stays in namespace
// bench; K never exceeds the N/2 pairs.
func TestLoadNamespaces(t *testing.T) {
	for _, c := range []struct {
		l     loadShape
		nss   int
		first string
		perNS int // objects in each namespace
	}{
		{loadShape{n: 1000, running: 10, nss: 100}, 100, "bench-000", 10},
		{loadShape{n: 10000, running: 100, nss: 100}, 100, "bench-000", 100},
		{loadShape{n: 100000, running: 1000, nss: 100}, 100, "bench-000", 1000},
		{loadShape{n: 10000, running: 1000, nss: 0}, 1, "bench", 10000},
		{loadShape{n: 10000, running: 1000, nss: 1}, 1, "bench", 10000},
		{loadShape{n: 100, running: 2, nss: 100}, 50, "bench-000", 2},
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
			total := 0
			for i, s := range specs {
				objs[s.RuntimeNamespace]++
				if runs[i] {
					running[s.RuntimeNamespace]++
					total++
				}
				if kinds[s.RuntimeNamespace] == nil {
					kinds[s.RuntimeNamespace] = map[string]int{}
				}
				kinds[s.RuntimeNamespace][s.Kind()]++
			}
			if total != c.l.running {
				t.Errorf("%d running, want %d", total, c.l.running)
			}
			pairs := c.l.running / 2
			for i, ns := range nss {
				if objs[ns] != c.perNS || kinds[ns]["deployment"] != c.perNS/2 {
					t.Errorf("namespace %s: %d objects (%v); want %d, half deployments", ns, objs[ns], kinds[ns], c.perNS)
				}
				want := 2 * (pairs / len(nss))
				if i < pairs%len(nss) {
					want += 2
				}
				if running[ns] != want {
					t.Errorf("namespace %s: %d running, want %d", ns, running[ns], want)
				}
			}
			if len(objs) != len(nss) {
				t.Errorf("objects in %d namespaces, want %d", len(objs), len(nss))
			}
		})
	}
}

// -running is a share of N or a number, rounded down to even and capped at N.
func TestRunningOf(t *testing.T) {
	for _, c := range []struct {
		v    string
		n    int
		want int
		err  bool
	}{
		{"1%", 1000, 10, false},
		{"1%", 10000, 100, false},
		{"1%", 100000, 1000, false},
		{"1%", 150, 0, false},
		{"0.5%", 1000, 4, false},
		{"100%", 1000, 1000, false},
		{"1000", 100000, 1000, false},
		{"1000", 100, 100, false},
		{"7", 100, 6, false},
		{"0", 100, 0, false},
		{"101%", 100, 0, true},
		{"-1", 100, 0, true},
		{"x%", 100, 0, true},
		{"lots", 100, 0, true},
	} {
		got, err := runningOf(c.v, c.n)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("runningOf(%q, %d) = %d, %v; want %d, error %v", c.v, c.n, got, err, c.want, c.err)
		}
	}
}
