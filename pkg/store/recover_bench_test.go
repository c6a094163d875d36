package store

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// seedRecover writes n records as created (epoch 1, with a UID and their
// Created event), object i in namespace i mod 100 as internal/genapi and
// the bench make them, and returns their runtime IDs in the order a
// cluster-wide watch-list streams them (namespace, then name).
func seedRecover(b testing.TB, path string, n int) []string {
	b.Helper()
	ctx := context.Background()
	s, err := Open(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	err = s.write(ctx, func(tx *sql.Tx) error {
		w, err := tx.PrepareContext(ctx, "INSERT INTO workloads ("+workloadColumns+") VALUES (?, 'k8s', ?, ?, ?, ?, ?, 'created', '', 1, 'Created', '', 0, 0, '', NULL, NULL, NULL)")
		if err != nil {
			return err
		}
		defer w.Close()
		for i := range n {
			id, ns, kind, name := recoverID(i)
			sp := fmt.Sprintf(`{"name":%q,"image":"registry.invalid/gen:1","workloadKind":%q,"runtimeNamespace":%q,"env":{"MODE":"generated"}}`, name, kind, ns)
			if _, err := w.ExecContext(ctx, id, ns, kind, name, fmt.Sprintf("uid-%06d", i), sp); err != nil {
				return err
			}
			if _, err := execEventTx(ctx, tx, id, string(Created), "", fmt.Sprintf("uid-%06d", i), 1, false, int64(0), "", nil, nil, nil); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	var ids []string
	for ns := range 100 {
		for i := ns; i < n; i += 100 {
			id, _, _, _ := recoverID(i)
			ids = append(ids, id)
		}
	}
	return ids
}

func recoverID(i int) (id, ns, kind, name string) {
	ns, kind, name = fmt.Sprintf("gen-%03d", i%100), "deployment", fmt.Sprintf("svc-%06d", i)
	if i%2 == 1 {
		kind, name = "job", fmt.Sprintf("task-%06d", i)
	}
	return "k8s-" + ns + "|" + kind + "|" + name, ns, kind, name
}

// BenchmarkRecoverPass is the store's part of recover --once over 20,000
// records that all changed: in the stream's order, batches of 256 record a
// ContainerStarted each through ApplyFree (heads, lease, transitions,
// release in one transaction), on a fresh copy of the database each pass. It reports the CPU per recorded transition.
func BenchmarkRecoverPass(b *testing.B) { benchRecoverPass(b, false) }

// BenchmarkRecoverPassCreated is the same in the order the records were
// created (namespaces interleaved), as hack/recmem's generated server
// streams them and as a monitor sees the changes of a bulk create: the
// best order for a table kept in creation order, the worst for one kept in
// runtime-ID order.
func BenchmarkRecoverPassCreated(b *testing.B) { benchRecoverPass(b, true) }

func benchRecoverPass(b *testing.B, created bool) {
	const n, batch = 20000, 256
	// A context that can end, as every command's (signal.NotifyContext):
	// under context.Background, whose Done is nil, modernc.org/sqlite skips
	// its per-statement interrupt watch, and the benchmark would not see it.
	ctx := b.Context()
	dir := b.TempDir()
	seed := filepath.Join(dir, "seed.db")
	ids := seedRecover(b, seed, n)
	if created {
		ids = ids[:0]
		for i := range n {
			id, _, _, _ := recoverID(i)
			ids = append(ids, id)
		}
	}
	o := Owner{ID: "bench", PID: os.Getpid(), Host: "bench"}
	var cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		db := filepath.Join(dir, "run.db")
		for _, suffix := range []string{"", "-wal", "-shm"} {
			_ = os.Remove(db + suffix)
		}
		copyFile(b, seed, db)
		s, err := Open(ctx, db)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := cpuTime()
		recorded := 0
		for at := 0; at < len(ids); at += batch {
			part := ids[at:min(at+batch, len(ids))]
			now := time.Now()
			live := func(_ string, h Head) bool { return !h.State.Terminal() }
			_, _, res, err := s.ApplyFree(ctx, o, part, time.Minute, live, func(heads map[string]Head, free []string) FreeBatch {
				var fb FreeBatch
				for _, id := range free {
					fb.Transitions = append(fb.Transitions, Transition{RuntimeID: id, Type: ContainerStarted, UID: heads[id].UID, Time: now, Message: "1/1 ready"})
				}
				return fb
			})
			if err != nil {
				b.Fatal(err)
			}
			for _, a := range res {
				if a.Applied {
					recorded++
				}
			}
		}
		cpu += cpuTime() - start
		b.StopTimer()
		if recorded != n {
			b.Fatalf("%d transitions recorded, want %d", recorded, n)
		}
		s.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(n*b.N)/cpu.Seconds(), "transitions/cpu-s")
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "transitions/s")
}

func copyFile(b testing.TB, from, to string) {
	b.Helper()
	in, err := os.Open(from)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		b.Fatal(err)
	}
	if err := out.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkReadBatch is the record read of ApplyFree alone: the 20,000
// records of BenchmarkRecoverPass in the stream's order, 256 to a write
// transaction (with their clusters, without specs), nothing written.
func BenchmarkReadBatch(b *testing.B) {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "read.db")
	ids := seedRecover(b, path, 20000)
	s, err := Open(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	n := 0
	cpu := cpuTime()
	for b.Loop() {
		for at := 0; at < len(ids); at += 256 {
			part := ids[at:min(at+256, len(ids))]
			err := s.write(ctx, func(tx *sql.Tx) error {
				rb, err := s.readBatch(ctx, tx, part, false, true)
				if err == nil && len(rb.recs) != len(part) {
					err = fmt.Errorf("%d records read of %d", len(rb.recs), len(part))
				}
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
			n += len(part)
		}
	}
	b.ReportMetric(float64(n)/(cpuTime()-cpu).Seconds(), "records/cpu-s")
}
