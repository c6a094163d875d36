package store

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// BenchmarkRenewLeases renews the leases of an owner that holds n (a
// monitor of n IDs does every 5 s). It reports the CPU time of the process
// per renewal and the frames it added to the write-ahead log.
func BenchmarkRenewLeases(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			ctx := context.Background()
			s, c := openTest(b)
			me := liveOwner("me")
			insertLeases(b, s, me, n, c.now())
			if _, err := s.Checkpoint(ctx); err != nil {
				b.Fatal(err)
			}
			frames := 0
			cpu0 := cpuTime()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				frames += renewAndCheckpoint(b, s, c, me, 5*time.Second)
			}
			b.StopTimer()
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(frames)/float64(b.N), "wal-frames/op")
		})
	}
}

// renewAndCheckpoint advances the clock by d, renews o's leases and
// returns the pages the renewal added to the write-ahead log (the log is
// checkpointed before, so it held none).
func renewAndCheckpoint(tb testing.TB, s *Store, c *clock, o Owner, d time.Duration) int {
	tb.Helper()
	ctx := context.Background()
	c.add(d)
	if err := s.RenewLeases(ctx, o); err != nil {
		tb.Fatal(err)
	}
	r, err := s.Checkpoint(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	return r.Log
}

// insertLeases gives o n leases (IDs w0000000 ...) with heartbeat at, as
// AcquireLeases would, without its cost.
func insertLeases(tb testing.TB, s *Store, o Owner, n int, at time.Time) {
	tb.Helper()
	if _, err := s.AcquireLeases(context.Background(), o, []string{"k8s://ns/job/first"}, time.Minute); err != nil {
		tb.Fatal(err)
	}
	if _, err := s.db.ExecContext(context.Background(), `WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM c WHERE i+1 < ?)
		INSERT INTO leases (runtime_id, owner, pid, host, heartbeat) SELECT printf('k8s://ns/job/w%07d', i), ?, ?, ?, ? FROM c`,
		n-1, o.ID, o.PID, o.Host, toDB(at)); err != nil {
		tb.Fatal(err)
	}
}

// RenewLeases renews every lease of its owner and no lease of another, by
// writing the owner's row alone: the leases' rows stay as they were, and the
// WAL grows by a page or two, not by the ~12 pages per 1,000 leases of
// rewriting each lease (~120 here).
func TestRenewLeasesWritesOneRow(t *testing.T) {
	ctx := context.Background()
	s, c := openTest(t)
	me, other := liveOwner("me"), liveOwner("other")
	insertLeases(t, s, me, 10000, c.now())
	if _, err := s.AcquireLeases(ctx, other, []string{"o1", "o2"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if pages := renewAndCheckpoint(t, s, c, me, 7*time.Second); pages > 4 {
		t.Errorf("a renewal of 10,000 leases wrote %d pages of WAL, want at most 4", pages)
	}
	var changed int
	if err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM leases WHERE heartbeat != ?", toDB(t0)).Scan(&changed); err != nil {
		t.Fatal(err)
	}
	if changed != 0 {
		t.Errorf("a renewal rewrote %d lease rows, want none", changed)
	}
	for _, id := range []string{"k8s://ns/job/first", "k8s://ns/job/w0000000", "k8s://ns/job/w0009998"} {
		if holder, beat, ok, err := s.LeaseHolder(ctx, id); err != nil || !ok || holder != me || !beat.Equal(t0.Add(7*time.Second)) {
			t.Errorf("LeaseHolder(%s) = %+v %v %v %v, want me renewed at t0+7s", id, holder, beat, ok, err)
		}
	}
	for _, id := range []string{"o1", "o2"} {
		if holder, beat, ok, err := s.LeaseHolder(ctx, id); err != nil || !ok || holder != other || !beat.Equal(t0) {
			t.Errorf("LeaseHolder(%s) = %+v %v %v %v, want other's untouched at t0", id, holder, beat, ok, err)
		}
	}
	// No leases: nothing to renew, no row.
	if err := s.RenewLeases(ctx, Owner{ID: "nobody", PID: 1, Host: me.Host}); err != nil {
		t.Fatal(err)
	}
	if got := ownerRows(t, s); !cmp.Equal(got, []string{"me", "other"}) {
		t.Errorf("lease_owners %q, want me and other", got)
	}
}

func ownerRows(t *testing.T, s *Store) []string {
	t.Helper()
	rows, err := s.db.QueryContext(context.Background(), "SELECT owner FROM lease_owners ORDER BY owner")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var o string
		if err := rows.Scan(&o); err != nil {
			t.Fatal(err)
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// An owner's renewal keeps every one of its leases live, those acquired
// long before too; once the owner stops renewing, another takes them over
// (AcquireLeases and ApplyFree alike), and the stale owner's row, without
// leases, goes at the next renewal of anyone.
func TestStaleOwnerTakeover(t *testing.T) {
	ctx := context.Background()
	s, c := openTest(t)
	// Both alive (this process): only the heartbeat decides.
	me, other := liveOwner("me"), liveOwner("other")
	const ttl = 30 * time.Second
	id := func(i int) string { return fmt.Sprintf("k8s-ns|job|w%d", i) }
	for i := range 5 {
		if _, err := s.AcquireLeases(ctx, me, []string{id(i)}, ttl); err != nil {
			t.Fatal(err)
		}
	}
	for range 4 {
		c.add(20 * time.Second)
		if err := s.RenewLeases(ctx, me); err != nil {
			t.Fatal(err)
		}
	}
	// me's leases were acquired 80 s ago, renewed now.
	if got, err := s.AcquireLeases(ctx, other, []string{id(0), id(1)}, ttl); err != nil || len(got) != 0 {
		t.Fatalf("AcquireLeases(other) of renewed leases = %q, %v; want none", got, err)
	}
	c.add(31 * time.Second)
	if got, err := s.AcquireLeases(ctx, other, []string{id(0), id(1)}, ttl); err != nil || !cmp.Equal(got, []string{id(0), id(1)}) {
		t.Fatalf("AcquireLeases(other) after me's ttl = %q, %v; want both", got, err)
	}
	if holder, beat, ok, err := s.LeaseHolder(ctx, id(0)); err != nil || !ok || holder != other || !beat.Equal(c.now()) {
		t.Errorf("LeaseHolder(%s) = %+v %v %v %v, want other now", id(0), holder, beat, ok, err)
	}
	// me's last leases: taken and dropped by ApplyFree.
	for i := 2; i < 5; i++ {
		mustPut(t, s, workload("ns", "job", fmt.Sprintf("w%d", i)))
	}
	_, free, _, err := s.ApplyFree(ctx, other, []string{id(2), id(3), id(4)}, ttl,
		func(string, Head) bool { return true }, func(map[string]Head, []string) FreeBatch { return FreeBatch{} })
	if err != nil || !cmp.Equal(free, []string{id(2), id(3), id(4)}) {
		t.Fatalf("ApplyFree(other) = %q, %v; want all of me's stale leases", free, err)
	}
	if got := ownerRows(t, s); !cmp.Equal(got, []string{"me", "other"}) {
		t.Errorf("lease_owners %q before a renewal, want me and other", got)
	}
	if err := s.RenewLeases(ctx, other); err != nil {
		t.Fatal(err)
	}
	if got := ownerRows(t, s); !cmp.Equal(got, []string{"other"}) {
		t.Errorf("lease_owners %q after a renewal, want other alone (me holds nothing)", got)
	}
	// Releasing all removes the owner's row.
	if err := s.ReleaseLeases(ctx, other); err != nil {
		t.Fatal(err)
	}
	if got := ownerRows(t, s); len(got) != 0 {
		t.Errorf("lease_owners %q after releasing all, want empty", got)
	}
}

// Leases written by a binary of the schema before lease_owners, which
// renewed each lease, stay as live as they were after the migration: each
// owner starts from its latest lease heartbeat. A stale owner stays stale.
func TestMigrateLeasesToOwners(t *testing.T) {
	ctx := context.Background()
	v := -1
	for i, m := range migrations {
		if strings.Contains(m.name, "lease_owners") {
			v = i
		}
	}
	if v < 1 {
		t.Fatal("no migration adds lease_owners")
	}
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range migrations[:v] {
		if _, err := db.ExecContext(ctx, m.sql); err != nil {
			t.Fatalf("%s: %v", m.name, err)
		}
	}
	live, gone := liveOwner("live"), liveOwner("gone")
	for _, l := range []struct {
		id   string
		o    Owner
		beat time.Duration // before t0
	}{
		{"a", live, 10 * time.Second},
		{"b", live, 12 * time.Second}, // renewed in the chunk before a's
		{"c", gone, 40 * time.Second},
	} {
		if _, err := db.ExecContext(ctx, "INSERT INTO leases (runtime_id, owner, pid, host, heartbeat) VALUES (?, ?, ?, ?, ?)",
			l.id, l.o.ID, l.o.PID, l.o.Host, toDB(t0.Add(-l.beat))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", v)); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s, c := openAt(t, path)
	if got, err := s.SchemaVersion(ctx); err != nil || got != SchemaLatest() {
		t.Fatalf("schema %d, %v; want %d", got, err, SchemaLatest())
	}
	if holder, beat, ok, err := s.LeaseHolder(ctx, "b"); err != nil || !ok || holder != live || !beat.Equal(t0.Add(-10*time.Second)) {
		t.Errorf("LeaseHolder(b) = %+v %v %v %v, want live at its owner's latest, t0-10s", holder, beat, ok, err)
	}
	me := liveOwner("me")
	if got, err := s.AcquireLeases(ctx, me, []string{"a", "b", "c"}, 30*time.Second); err != nil || !cmp.Equal(got, []string{"c"}) {
		t.Errorf("AcquireLeases after the migration = %q, %v; want c alone (a and b are live's)", got, err)
	}
	c.add(25 * time.Second)
	if got, err := s.AcquireLeases(ctx, me, []string{"a", "b"}, 30*time.Second); err != nil || !cmp.Equal(got, []string{"a", "b"}) {
		t.Errorf("AcquireLeases once live is stale = %q, %v; want a and b", got, err)
	}
}
