package store

import (
	"context"
	"testing"
)

// BenchmarkHistory reads the history of each of 500 records (`history`,
// `inspect`), one Events call each, once the records have 80 events each
// (40,000 recorded in batches of 250, as BenchmarkApplyBatch writes them).
func BenchmarkHistory(b *testing.B) {
	ctx := context.Background()
	s, _ := openTest(b)
	ids := fill(b, s, 500)
	cycle := []EventType{StartRequested, ContainerStarted, StopRequested, ContainerExited}
	var ts []Transition
	for i := range 40000 {
		ts = append(ts, Transition{RuntimeID: ids[i%len(ids)], Type: cycle[(i/len(ids))%len(cycle)], Message: "bench"})
		if len(ts) == 250 {
			if _, err := s.ApplyBatchNoSpecs(ctx, ts); err != nil {
				b.Fatal(err)
			}
			ts = ts[:0]
		}
	}
	cpu := cpuTime()
	for b.Loop() {
		for _, id := range ids {
			evs, err := s.Events(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			if len(evs) != 80 {
				b.Fatalf("%d events of %s, want 80", len(evs), id)
			}
		}
	}
	b.ReportMetric(float64((cpuTime()-cpu).Milliseconds())/float64(b.N), "cpu-ms/op")
}
