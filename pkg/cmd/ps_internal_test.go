package cmd

import (
	"testing"
	"time"
)

// rowPrinter.age remembers ages by whole second: it must print what age
// prints for every duration, whatever its fraction of a second.
func TestRowPrinterAgeIsAge(t *testing.T) {
	now := time.Date(2026, 12, 1, 23, 0, 0, 500_000_000, time.UTC)
	rp := &rowPrinter{now: now}
	var ds []time.Duration
	for _, base := range []time.Duration{-3 * time.Second, 0, 59 * time.Second, 119 * time.Second, 10 * time.Minute,
		3*time.Hour - time.Second, 8 * time.Hour, 30 * time.Hour, 47*time.Hour + 59*time.Minute, 8 * 24 * time.Hour,
		2 * 365 * 24 * time.Hour, 9 * 365 * 24 * time.Hour} {
		for _, frac := range []time.Duration{0, 1, 499_999_999, 500_000_000, 999_999_999} {
			for s := range 3 {
				ds = append(ds, base+time.Duration(s)*time.Second+frac, base+time.Duration(s)*time.Minute+frac)
			}
		}
	}
	for range 2 { // the second pass reads what the first remembered
		for _, d := range ds {
			ts := now.Add(-d)
			if got, want := rp.age(ts), age(ts, now); got != want {
				t.Fatalf("age of %v: %q, want %q", d, got, want)
			}
		}
	}
	if got := rp.age(time.Time{}); got != "<unknown>" {
		t.Fatalf("age of the zero time: %q", got)
	}
}
