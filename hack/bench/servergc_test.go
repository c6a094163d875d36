package main

import (
	"testing"
	"time"
)

func TestGCCount(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		err  bool
	}{
		{in: "# HELP go_gc_duration_seconds A summary.\n# TYPE go_gc_duration_seconds summary\n" +
			"go_gc_duration_seconds{quantile=\"0\"} 2.1e-05\ngo_gc_duration_seconds_sum 0.0123\ngo_gc_duration_seconds_count 26\n" +
			"go_goroutines 1234\n", want: 26},
		{in: "go_gc_duration_seconds_count 1.234e+03\n", want: 1234},
		{in: "go_gc_duration_seconds_count 7 1733300000000\n", want: 7}, // with a timestamp
		{in: "go_gc_duration_seconds_sum 3\ngo_goroutines 10\n", err: true},
		{in: "go_gc_duration_seconds_count many\n", err: true},
	} {
		got, err := gcCount([]byte(tc.in))
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("gcCount(%q) = %d, %v; want %d (error %v)", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestGCsOf(t *testing.T) {
	ms := []measured{{ServerGCs: 0, Wall: 4460 * time.Millisecond}, {ServerGCs: 1, Wall: 5220 * time.Millisecond}, {ServerGCs: 0, Wall: 80 * time.Millisecond}}
	if got, want := gcsOf(ms), "0 (4.46 s), 1 (5.22 s), 0 (0.08 s)"; got != want {
		t.Errorf("gcsOf = %q, want %q", got, want)
	}
	if got := gcsOf([]measured{{ServerGCs: 0}, {ServerGCs: -1}}); got != "" {
		t.Errorf("gcsOf with an uncounted run = %q, want none", got)
	}
}
