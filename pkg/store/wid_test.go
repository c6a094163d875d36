package store

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
)

// TestMigrateEventsWid opens a file written by schema 8 and checks schema
// 9: every record has its own wid (in the order of the runtime IDs), every
// event its record's, the histories read as before, the once-per-epoch
// rule still holds, a record made afterwards takes the next wid and a
// record put again keeps its own.
func TestMigrateEventsWid(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range migrations[:8] {
		if _, err := db.ExecContext(ctx, m.sql); err != nil {
			t.Fatal(err)
		}
	}
	const n = 300
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	id := func(i int) string { return fmt.Sprintf("k8s-ns-%d|job|w-%03d", i%7, i) }
	for _, i := range rand.New(rand.NewPCG(3, 4)).Perm(n) { // made in no particular order
		if _, err := tx.ExecContext(ctx, `INSERT INTO workloads (runtime_id, runtime, namespace, kind, name, uid, spec, state, message,
			epoch, request, expect, created_at, updated_at) VALUES (?, 'k8s', ?, 'job', ?, ?, '{}', 'exited', '', 2, 'StartRequested', '', 1, 2)`,
			id(i), fmt.Sprintf("ns-%d", i%7), fmt.Sprintf("w-%03d", i), fmt.Sprintf("uid-%d", i)); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO events (runtime_id, type, message, uid, epoch, observed, time) VALUES
			(?1, 'Created', '', ?2, 1, 0, 1), (?1, 'StartRequested', '', ?2, 2, 0, 2), (?1, 'ContainerExited', '', ?2, 2, 1, 3)`,
			id(i), fmt.Sprintf("uid-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "PRAGMA user_version = 8"); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s, _ := openAt(t, path)
	if v, err := s.SchemaVersion(ctx); err != nil || v != SchemaLatest() {
		t.Fatalf("schema %d, %v; want %d", v, err, SchemaLatest())
	}
	wids := func() map[string]int64 {
		rows, err := s.db.QueryContext(ctx, "SELECT runtime_id, wid FROM workloads ORDER BY runtime_id")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		m := map[string]int64{}
		for rows.Next() {
			var rid string
			var wid sql.NullInt64
			if err := rows.Scan(&rid, &wid); err != nil {
				t.Fatal(err)
			}
			if !wid.Valid {
				t.Fatalf("%s has no wid", rid)
			}
			m[rid] = wid.Int64
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return m
	}
	before := wids()
	var prev int64 // 1, 2, 3, ... in the order of the runtime IDs: each its own
	var prevID string
	rows, err := s.db.QueryContext(ctx, "SELECT runtime_id, wid FROM workloads ORDER BY runtime_id")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var rid string
		var w int64
		if err := rows.Scan(&rid, &w); err != nil {
			t.Fatal(err)
		}
		if w != prev+1 {
			t.Errorf("%s has wid %d after %s's %d, want the runtime IDs' order", rid, w, prevID, prev)
		}
		prev, prevID = w, rid
	}
	rows.Close()
	var bad int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM events e WHERE e.wid IS NULL
		OR e.wid != (SELECT w.wid FROM workloads w WHERE w.runtime_id = e.runtime_id)`).Scan(&bad); err != nil || bad != 0 {
		t.Errorf("%d events without their record's wid (%v)", bad, err)
	}
	for _, i := range []int{0, 1, 150, n - 1} {
		evs, err := s.Events(ctx, id(i))
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 3 || evs[0].Type != Created || evs[2].Type != ContainerExited || evs[0].RuntimeID != id(i) {
			t.Errorf("history of %s after the migration: %+v", id(i), evs)
		}
	}
	// The once-per-object-and-epoch rule, now on wid.
	if _, err := s.db.ExecContext(ctx, insertEvent(false), id(5), string(ContainerExited), "", "uid-5", 2, true, 9, "", nil, nil, nil); err == nil {
		t.Error("a second ContainerExited of one object and epoch was inserted, want a unique constraint error")
	}

	// A record made now takes the next wid; one put again keeps its own,
	// and its history.
	w := workload("new", "job", "x")
	if err := s.Put(ctx, w, Transition{}); err != nil {
		t.Fatal(err)
	}
	old := workload("ns-3", "job", "w-003")
	old.RuntimeID = id(3)
	old.UID = "uid-3"
	if err := s.Put(ctx, old, Transition{}); err != nil {
		t.Fatal(err)
	}
	after := wids()
	if after[w.RuntimeID] != n+1 {
		t.Errorf("a new record took wid %d, want %d", after[w.RuntimeID], n+1)
	}
	if after[id(3)] != before[id(3)] {
		t.Errorf("a record put again moved from wid %d to %d", before[id(3)], after[id(3)])
	}
	if evs, err := s.Events(ctx, id(3)); err != nil || len(evs) != 4 {
		t.Errorf("history of a record put again: %d events, %v; want 4", len(evs), err)
	}
	if err := s.Put(ctx, workload("new", "job", "y"), Transition{}); err != nil {
		t.Fatal(err)
	}
	if got := wids()[workload("new", "job", "y").RuntimeID]; got != n+2 {
		t.Errorf("the next record took wid %d, want %d", got, n+2)
	}
	if err := s.IntegrityCheck(ctx); err != nil {
		t.Error(err)
	}
}
