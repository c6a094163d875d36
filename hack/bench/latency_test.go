package main

import (
	"testing"
	"time"
)

// distOf reports the minimum and the samples below 0 (the monitor's watch delivered before the
// benchmark's own), which p50 and p99 hide.
func TestDistNegative(t *testing.T) {
	ms := func(v int) time.Duration { return time.Duration(v) * time.Millisecond }
	var ds []time.Duration
	for v := -3; v < 97; v++ {
		ds = append(ds, ms(v))
	}
	d := distOf(ds)
	if d.n != 100 || d.mind != ms(-3) || d.maxd != ms(96) || d.neg != 3 || d.p50 != ms(46) || d.p99 != ms(95) {
		t.Errorf("distOf = %+v", d)
	}
	if d := distOf([]time.Duration{ms(0), ms(1)}); d.neg != 0 {
		t.Errorf("0 counted below 0: %+v", d)
	}
}
