package store

import (
	"context"
	"testing"
)

// TestApplyBatchAllocs counts the heap allocations of ApplyBatchNoSpecs per
// recorded transition, in batches of 250 over 500 records as
// BenchmarkApplyBatchNoSpecs applies them. The record read's targets are
// allocated once per query (recordScanner), not once per row and column as
// scanRow's were, and the arguments of the statements box no sql.Null*:
// ~43 allocations a transition where there were ~61 (each one more for the
// collector to sweep and, in the profile, a tenth of the CPU in
// preemptions for its cycles).
func TestApplyBatchAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	ctx := context.Background()
	s, _ := openTest(t)
	ids := fill(t, s, 500)
	cycle := []EventType{StartRequested, ContainerStarted, StopRequested, ContainerExited}
	const batch = 250
	next := 0
	ts := make([]Transition, 0, batch)
	apply := func() {
		ts = ts[:0]
		for range batch {
			ts = append(ts, Transition{RuntimeID: ids[next%len(ids)], Type: cycle[(next/len(ids))%len(cycle)], Message: "bench"})
			next++
		}
		as, err := s.ApplyBatchNoSpecs(ctx, ts)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range as {
			if !a.Applied {
				t.Fatalf("%s %s not applied", a.Event.RuntimeID, a.Event.Type)
			}
		}
	}
	apply() // the statements prepared
	perTransition := testing.AllocsPerRun(16, apply) / batch
	t.Logf("%.1f allocations per transition", perTransition)
	if perTransition > 50 {
		t.Errorf("%.1f allocations per recorded transition, want at most 50", perTransition)
	}
}
