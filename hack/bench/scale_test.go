package main

import (
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
