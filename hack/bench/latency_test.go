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

// traceOf reads the writer's klog lines (pkg/monitor/writer.go at -v=4) logged from the release
// on, and nothing else.
func TestTraceOf(t *testing.T) {
	from := time.Date(2026, 12, 1, 16, 40, 0, 0, time.Local)
	stderr := `I1201 16:39:59.999999    42 writer.go:120] "monitor: batch recorded" transitions=256 events=256 waitedMs=900 enrichMs=0 commitMs=50 onEventMs=3
I1201 16:40:00.000100    42 writer.go:120] "monitor: batch recorded" transitions=1 events=1 waitedMs=0.4 enrichMs=0 commitMs=1.5 onEventMs=0.1
W1201 16:40:01.000000    42 reflector.go:1] something else
I1201 16:40:02.500000    42 writer.go:120] "monitor: batch recorded" transitions=3 events=2 waitedMs=12.5 enrichMs=0 commitMs=80 onEventMs=0.2
I1201 16:40:03.000000    42 writer.go:40] "monitor: history polled" ms=7.5
not a klog line
`
	tr := traceOf(stderr, from)
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	if tr.batches != 2 || tr.waited.maxd != ms(12.5) || tr.waited.mind != ms(0.4) || tr.commit.maxd != ms(80) || tr.onEvent.maxd != ms(0.2) {
		t.Errorf("traceOf = %+v", tr)
	}
	if tr.polls.n != 1 || tr.polls.maxd != ms(7.5) {
		t.Errorf("polls = %+v", tr.polls)
	}
}

func TestParseLatwatch(t *testing.T) {
	name, cond, watch, ok := parseLatwatch("lat-0007 1764606000000000000 1764606000123456789")
	if !ok || name != "lat-0007" || cond.UnixNano() != 1764606000000000000 || watch.UnixNano() != 1764606000123456789 {
		t.Errorf("parseLatwatch = %q %v %v %v", name, cond, watch, ok)
	}
	for _, bad := range []string{"synced", "a b", "a 1 x", "a 1 2 3"} {
		if _, _, _, ok := parseLatwatch(bad); ok {
			t.Errorf("parseLatwatch(%q) ok", bad)
		}
	}
}
