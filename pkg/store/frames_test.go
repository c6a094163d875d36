package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestApplyBatchFrames counts the WAL frames one batch of BenchmarkApplyBatch
// writes once each record has the history of ~40 events the benchmark
// leaves: 231.5 a batch of 250 at a91dafb, ~175 of them leaves of
// events_key, whose entries lead with the runtime ID; 62 since schema 9
// (no index on events: each record's history is a chain). (Keyed by an integer
// per record in creation order it wrote 129, but recover's stream-order
// batches then scattered: BenchmarkRecoverPass -30 % per CPU-second; see
// the stwrite branch's history.)
func TestApplyBatchFrames(t *testing.T) {
	if testing.Short() {
		t.Skip("fills 20,000 events")
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s, _ := openAt(t, path)
	ids := fill(t, s, 500)
	cycle := []EventType{StartRequested, ContainerStarted, StopRequested, ContainerExited}
	next := 0
	batch := func() {
		var ts []Transition
		for range 250 {
			ts = append(ts, Transition{RuntimeID: ids[next%len(ids)], Type: cycle[(next/len(ids))%len(cycle)], Message: "bench"})
			next++
		}
		if _, err := s.ApplyBatchNoSpecs(ctx, ts); err != nil {
			t.Fatal(err)
		}
	}
	for range 80 {
		batch()
	}
	var page int64
	if err := s.db.QueryRowContext(ctx, "PRAGMA page_size").Scan(&page); err != nil {
		t.Fatal(err)
	}
	var total int64
	for range 4 {
		if _, err := s.db.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
			t.Fatal(err)
		}
		batch()
		fi, err := os.Stat(path + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		total += (fi.Size() - 32) / (page + 24)
	}
	t.Logf("%.1f WAL frames a batch of 250 (%.3f a transition)", float64(total)/4, float64(total)/1000)
	if total/4 > 100 {
		t.Errorf("a batch of 250 wrote %d WAL frames, want at most 100", total/4)
	}
}
