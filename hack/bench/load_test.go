package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
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

// The settle wait follows progress: counts that keep moving are waited for past the stall time
// (a loaded machine settles slowly), counts that stop fail after it, and the limit bounds the whole.
func TestWaitProgress(t *testing.T) {
	want := settled{started: 40}
	steady := func() func(context.Context) (settled, error) {
		var s settled
		return func(context.Context) (settled, error) { s.started++; return s, nil }
	}
	t.Run("slow but moving", func(t *testing.T) {
		// 40 polls of 2 ms take longer than the 10 ms stall time.
		s, err := waitProgress(t.Context(), want, steady(), 2*time.Millisecond, 10*time.Millisecond, time.Hour)
		if err != nil || s != want {
			t.Fatalf("got %+v, %v; want %+v", s, err, want)
		}
	})
	t.Run("stuck", func(t *testing.T) {
		stuck := func(context.Context) (settled, error) { return settled{started: 3}, nil }
		_, err := waitProgress(t.Context(), want, stuck, time.Millisecond, 10*time.Millisecond, time.Hour)
		if err == nil || !strings.Contains(err.Error(), "no progress for") {
			t.Fatalf("err = %v, want no progress", err)
		}
	})
	t.Run("failing the same way", func(t *testing.T) {
		n := 0
		flaky := func(context.Context) (settled, error) {
			if n++; n < 30 {
				return settled{}, errors.New("etcd leader changed")
			}
			return want, nil
		}
		// The same error for 30 polls is no progress: it fails after the stall time.
		if _, err := waitProgress(t.Context(), want, flaky, 2*time.Millisecond, 10*time.Millisecond, time.Hour); err == nil {
			t.Fatal("a count failing the same way for longer than the stall time: no error")
		}
	})
	t.Run("limit", func(t *testing.T) {
		never := settled{started: 1 << 30}
		_, err := waitProgress(t.Context(), never, steady(), time.Millisecond, time.Hour, 20*time.Millisecond)
		if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "not settled after") {
			t.Fatalf("err = %v, want the limit's", err)
		}
	})
}
