package store

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// BenchmarkReleaseOne releases one lease of an owner that holds n.
func BenchmarkReleaseOne(b *testing.B) {
	for _, n := range []int{1000, 20000, 100000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			ctx := context.Background()
			s, _ := openTest(b)
			host, _ := os.Hostname()
			me := Owner{ID: "me", PID: os.Getpid(), Host: host}
			if _, err := s.db.ExecContext(ctx, `WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM c WHERE i+1 < ?)
				INSERT INTO leases (runtime_id, owner, pid, host, heartbeat) SELECT printf('k8s://ns/job/w%07d', i), ?, ?, ?, ? FROM c`,
				n, me.ID, me.PID, me.Host, time.Now().UnixNano()); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := s.ReleaseLeases(ctx, me, fmt.Sprintf("k8s://ns/job/w%07d", i%n)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestReleaseByPrimaryKey checks that releasing some IDs looks them up by
// the primary key and does not read every lease of the owner through the
// owner index (86 ms for one ID at 100,000 leases, in a write transaction the
// monitor's writer waits for; BenchmarkReleaseOne).
func TestReleaseByPrimaryKey(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	rows, err := s.db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+releaseIDsQuery, `["a"]`, "me")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range plan {
		if strings.Contains(d, "leases_owner") || strings.HasPrefix(d, "SCAN leases") {
			t.Errorf("release reads the owner's leases: %q (plan %q)", d, plan)
		}
		if strings.HasPrefix(d, "SEARCH leases") && strings.Contains(d, "(runtime_id=?)") {
			found = true
		}
	}
	if !found {
		t.Errorf("release does not search leases by runtime_id: plan %q", plan)
	}
}

// TestCheckpointRestartsWAL checks that a Checkpoint copies the WAL and
// that the next write starts the WAL over: a process that checkpoints in
// the background keeps the WAL short, so SQLite's automatic checkpoint (at
// wal_autocheckpoint frames of WAL) does not run in its commits.
func TestCheckpointRestartsWAL(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	host, _ := os.Hostname()
	me := Owner{ID: "me", PID: os.Getpid(), Host: host}
	write := func(n int) {
		for i := range n {
			if _, err := s.AcquireLeases(ctx, me, []string{fmt.Sprintf("id-%d", i)}, time.Minute); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(50)
	r, err := s.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.Busy || r.Log == 0 || r.Checkpointed != r.Log {
		t.Fatalf("first checkpoint = %+v, want every frame of a non-empty WAL copied", r)
	}
	before := r.Log
	write(1)
	r, err = s.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.Log >= before || r.Checkpointed != r.Log {
		t.Errorf("after one more write the WAL has %d frames (%+v), want fewer than the %d before: it did not start over", r.Log, r, before)
	}
}
