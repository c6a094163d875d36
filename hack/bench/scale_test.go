package main

import (
	"slices"
	"testing"
	"time"
)

// kubectl get repeats unless its first run took longer than -slow-once; 0 always repeats.
func TestOnceEnough(t *testing.T) {
	for _, c := range []struct {
		first, limit time.Duration
		want         bool
	}{
		{2 * time.Second, time.Minute, false},
		{time.Minute, time.Minute, false},
		{116 * time.Second, time.Minute, true},
		{10 * time.Minute, 0, false},
	} {
		if got := onceEnough(c.first, c.limit); got != c.want {
			t.Errorf("onceEnough(%s, %s) = %v, want %v", c.first, c.limit, got, c.want)
		}
	}
}

// With a baseline, each of the three programs runs first, second and third once in any three
// repetitions in a row (whatever ran second was slower, whichever binary it was); alone, the
// plugin runs by itself.
func TestRunOrderRotates(t *testing.T) {
	if got := runOrder(4, false); !slices.Equal(got, []string{"plugin"}) {
		t.Errorf("runOrder without a baseline = %q, want the plugin alone", got)
	}
	for start := range 3 {
		pos := map[string]map[int]bool{}
		for i := start; i < start+3; i++ {
			got := runOrder(i, true)
			if len(got) != 3 {
				t.Fatalf("runOrder(%d) = %q, want three programs", i, got)
			}
			for p, prog := range got {
				if pos[prog] == nil {
					pos[prog] = map[int]bool{}
				}
				pos[prog][p] = true
			}
		}
		for _, prog := range []string{"baseline", "plugin", "limit"} {
			if len(pos[prog]) != 3 {
				t.Errorf("repetitions %d-%d: %s ran at positions %v, want each of 0, 1, 2 once", start, start+2, prog, pos[prog])
			}
		}
	}
}
