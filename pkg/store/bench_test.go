package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"testing"
)

// fill inserts n workloads in one transaction, a third of them exited.
func fill(b testing.TB, s *Store, n int) []string {
	b.Helper()
	ctx := context.Background()
	var ids []string
	err := s.write(ctx, func(tx *sql.Tx) error {
		st, err := tx.PrepareContext(ctx, "INSERT INTO workloads ("+workloadColumns+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1, 'Created', '', 0, 0, '', NULL, NULL, NULL)")
		if err != nil {
			return err
		}
		defer st.Close()
		for i := range n {
			w := workload(fmt.Sprintf("ns-%02d", i%50), []string{"deployment", "job"}[i%2], fmt.Sprintf("w-%05d", i))
			w.Spec.Command = []string{"serve", "--port", "8080"}
			w.Spec.Labels = map[string]string{"team": "data", "tier": "backend"}
			sp, err := json.Marshal(w.Spec)
			if err != nil {
				return err
			}
			state := StateRunning
			if i%3 == 0 {
				state = StateExited
			}
			if _, err := st.ExecContext(ctx, w.RuntimeID, w.Runtime, w.Namespace, w.Kind, w.Name, fmt.Sprintf("uid-%d", i), string(sp), string(state), ""); err != nil {
				return err
			}
			ids = append(ids, w.RuntimeID)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return ids
}

// BenchmarkList10k is a full List (with specs) over 10,000 records.
func BenchmarkList10k(b *testing.B) { benchList(b, Filter{All: true}) }

// BenchmarkPs10k is `ps -a` over 10,000 records: ps never shows the spec.
func BenchmarkPs10k(b *testing.B) { benchList(b, Filter{All: true, NoSpec: true}) }

// BenchmarkRecords5k reads the states and UIDs of 5,000 IDs as the monitor
// does when it registers them: Records, one query per 500 IDs.
func BenchmarkRecords5k(b *testing.B) {
	ctx := context.Background()
	s, _ := openTest(b)
	ids := fill(b, s, 5000)
	cpu := cpuTime()
	for b.Loop() {
		recs, err := s.Records(ctx, ids)
		if err != nil || len(recs) != len(ids) {
			b.Fatalf("%d records, %v", len(recs), err)
		}
	}
	b.ReportMetric(float64((cpuTime()-cpu).Milliseconds())/float64(b.N), "cpu-ms/op")
}

// BenchmarkGetEach5k is the same with one Get per ID (specs decoded), as the
// monitor did before Records: the "before" of docs/performance.md.
func BenchmarkGetEach5k(b *testing.B) {
	ctx := context.Background()
	s, _ := openTest(b)
	ids := fill(b, s, 5000)
	cpu := cpuTime()
	for b.Loop() {
		for _, id := range ids {
			if _, err := s.Get(ctx, id); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64((cpuTime()-cpu).Milliseconds())/float64(b.N), "cpu-ms/op")
}

func benchList(b *testing.B, f Filter) {
	ctx := context.Background()
	s, _ := openTest(b)
	fill(b, s, 10000)
	cpu := cpuTime()
	for b.Loop() {
		ws, err := s.List(ctx, f)
		if err != nil {
			b.Fatal(err)
		}
		if len(ws) != 10000 {
			b.Fatalf("%d records", len(ws))
		}
	}
	b.ReportMetric(float64((cpuTime()-cpu).Milliseconds())/float64(b.N), "cpu-ms/op")
}

// BenchmarkApplyBatch applies b.N transitions (each recorded) in batches of
// 250 over 500 workloads.
func BenchmarkApplyBatch(b *testing.B) { benchApply(b, (*Store).ApplyBatch, 250) }

// BenchmarkApplyBatchNoSpecs is the same through ApplyBatchNoSpecs, the
// form the monitors and recover record with.
func BenchmarkApplyBatchNoSpecs(b *testing.B) { benchApply(b, (*Store).ApplyBatchNoSpecs, 250) }

// BenchmarkApplyBatchNoSpecsSmall is the same in batches of 4, as a
// following monitor records the few events that arrive together.
func BenchmarkApplyBatchNoSpecsSmall(b *testing.B) {
	benchApply(b, (*Store).ApplyBatchNoSpecs, 4)
}

func benchApply(b *testing.B, apply func(*Store, context.Context, []Transition) ([]Applied, error), batchSize int) {
	ctx := b.Context() // cancellable, as a command's (see benchRecoverPass)
	s, _ := openTest(b)
	ids := fill(b, s, 500)
	cycle := []EventType{StartRequested, ContainerStarted, StopRequested, ContainerExited}
	var ts []Transition
	next := 0
	b.ResetTimer()
	cpu := cpuTime()
	for i := 0; i < b.N; i++ {
		id := ids[next%len(ids)]
		typ := cycle[(next/len(ids))%len(cycle)]
		ts = append(ts, Transition{RuntimeID: id, Type: typ, Message: "bench"})
		next++
		if len(ts) == batchSize || i == b.N-1 {
			as, err := apply(s, ctx, ts)
			if err != nil {
				b.Fatal(err)
			}
			for _, a := range as {
				if !a.Applied {
					b.Fatalf("%s %s not applied (state %s)", a.Event.RuntimeID, a.Event.Type, a.Workload.State)
				}
			}
			ts = ts[:0]
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "transitions/s")
	b.ReportMetric(float64(b.N)/(cpuTime()-cpu).Seconds(), "transitions/cpu-s")
}
