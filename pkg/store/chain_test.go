package store

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// execEventTx records an event as another process's writer does (schema 9:
// appended to the record's chain; an observed event of a type recorded once
// per object and epoch is skipped when its chain has it already), in tx.
// args are the columns of insertEventQuery but prev: runtime ID, type,
// message, UID, epoch, observed, time, reason, exit code, start, finish. It
// returns the event's seq, 0 when skipped.
func execEventTx(ctx context.Context, tx *sql.Tx, args ...any) (int64, error) {
	id, typ, uid, epoch, observed := args[0].(string), EventType(args[1].(string)), args[3].(string), args[4].(int), args[5].(bool)
	h, err := readHead(ctx, tx, id)
	if err != nil {
		return 0, err
	}
	once := observed && onceBit(typ) != 0
	if once {
		dup, err := h.has(ctx, tx, epoch, typ, uid)
		if err != nil || dup {
			return 0, err
		}
	}
	seq, err := appendEvent(ctx, tx, h.last, args...)
	if err != nil {
		return 0, err
	}
	h.recorded(seq, epoch, typ, uid, once)
	return seq, h.write(ctx, tx, id)
}

// execEvent is execEventTx in a write transaction of s of its own.
func execEvent(ctx context.Context, s *Store, args ...any) (int64, error) {
	var seq int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		var err error
		seq, err = execEventTx(ctx, tx, args...)
		return err
	})
	return seq, err
}

// TestMigrateSchema8 opens a file written by schema 8 with the interleaved
// histories of three records (one pruned before, leaving a gap at the tail
// of seq): schema 9 chains each history in order, keeps the once rule for
// the events recorded before it, deletes a record's events by its chain,
// and AUTOINCREMENT goes on after the largest seq ever given.
func TestMigrateSchema8(t *testing.T) {
	ctx := context.Background()
	openTest(t) // SQLite takes the store's allocator and mutexes before the first connection below
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	var qs []string
	for _, m := range migrations[:8] {
		qs = append(qs, m.sql)
	}
	a, b, gone := "k8s-default|job|a", "k8s-default|deployment|b", "k8s-default|job|gone"
	qs = append(qs, "PRAGMA user_version = 8",
		`INSERT INTO workloads (runtime_id, runtime, namespace, kind, name, uid, spec, state, message, epoch, request, expect, created_at, updated_at) VALUES
		 ('k8s-default|job|a', 'k8s', 'default', 'job', 'a', 'ua', '{}', 'exited', '', 2, 'StartRequested', '', 0, 0),
		 ('k8s-default|deployment|b', 'k8s', 'default', 'deployment', 'b', 'ub', '{}', 'deleted', '', 1, 'Created', '', 0, 0),
		 ('k8s-default|job|gone', 'k8s', 'default', 'job', 'gone', 'ug', '{}', 'deleted', '', 1, 'Created', '', 0, 0)`,
		`INSERT INTO events (runtime_id, type, message, uid, epoch, observed, time) VALUES
		 ('k8s-default|job|a', 'Created', '', 'ua', 1, 0, 0),
		 ('k8s-default|deployment|b', 'Created', '', 'ub', 1, 0, 1),
		 ('k8s-default|job|a', 'ContainerStarted', '', 'ua', 1, 1, 2),
		 ('k8s-default|job|a', 'StartRequested', '', 'ua', 2, 0, 3),
		 ('k8s-default|deployment|b', 'ContainerDeleted', '', 'ub', 1, 1, 4),
		 ('k8s-default|job|a', 'ContainerStarted', '', 'ua', 2, 1, 5),
		 ('k8s-default|job|a', 'ContainerExited', '', 'ua', 2, 1, 6),
		 ('k8s-default|job|gone', 'Created', '', 'ug', 1, 0, 7)`,
		// A record pruned at the tail: its seq is not given again.
		"DELETE FROM events WHERE runtime_id = 'k8s-default|job|gone'",
		"DELETE FROM workloads WHERE runtime_id = 'k8s-default|job|gone'")
	for _, q := range qs {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	s, c := openAt(t, path)
	if v, err := s.SchemaVersion(ctx); err != nil || v != 9 {
		t.Fatalf("schema %d, %v; want 9", v, err)
	}
	history := func(id string) (types []EventType, seqs []int64) {
		t.Helper()
		evs, err := s.Events(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			types, seqs = append(types, e.Type), append(seqs, e.Seq)
		}
		return types, seqs
	}
	types, seqs := history(a)
	if diff := cmp.Diff([]EventType{Created, ContainerStarted, StartRequested, ContainerStarted, ContainerExited}, types); diff != "" {
		t.Errorf("migrated history of a (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int64{1, 3, 4, 6, 7}, seqs); diff != "" {
		t.Errorf("seqs of a (-want +got):\n%s", diff)
	}
	if types, _ := history(b); !cmp.Equal([]EventType{Created, ContainerDeleted}, types) {
		t.Errorf("migrated history of b: %v", types)
	}
	if types, _ := history(gone); len(types) != 0 {
		t.Errorf("history of a pruned record: %v", types)
	}
	// Recorded before the migration: still once per object and epoch.
	res, err := s.ApplyBatch(ctx, []Transition{
		{RuntimeID: b, Type: ContainerDeleted, UID: "ub"},
		{RuntimeID: a, Type: ContainerExited, UID: "ua"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Applied {
			t.Errorf("%s of %s recorded again after the migration", r.Event.Type, r.Event.RuntimeID)
		}
	}
	// New events go on the chain, after the largest seq ever given (8).
	res, err = s.ApplyBatch(ctx, []Transition{{RuntimeID: a, Type: StartRequested}, {RuntimeID: a, Type: ContainerStarted}})
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Applied || !res[1].Applied || res[0].Event.Seq != 9 || res[1].Event.Seq != 10 {
		t.Errorf("new events %+v", res)
	}
	if _, seqs := history(a); !cmp.Equal([]int64{1, 3, 4, 6, 7, 9, 10}, seqs) {
		t.Errorf("seqs of a after two more events: %v", seqs)
	}
	// Prune removes b's events by its chain, and only them.
	c.add(time.Hour)
	pruned, err := s.Prune(ctx, PruneFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pruned) != 1 || pruned[0].RuntimeID != b || pruned[0].Events != 2 {
		t.Errorf("pruned %+v, want b with 2 events", pruned)
	}
	var n int
	if err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM events").Scan(&n); err != nil || n != 7 {
		t.Errorf("%d events left, %v; want a's 7", n, err)
	}
	if err := s.IntegrityCheck(ctx); err != nil {
		t.Error(err)
	}
}

// TestOnceOtherUID: an observed event about a UID other than the one the
// record's once columns keep is still recorded once per epoch (found on the
// chain), and one of a new epoch is recorded again.
func TestOnceOtherUID(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	w := workload("default", "job", "j")
	w.UID = "u1"
	mustPut(t, s, w)
	rec := func(uid string, epoch int) int64 {
		t.Helper()
		seq, err := execEvent(ctx, s, w.RuntimeID, string(ContainerExited), "", uid, epoch, true, int64(0), "", nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return seq
	}
	if rec("u1", 1) == 0 || rec("u1", 1) != 0 {
		t.Error("u1: want recorded once")
	}
	if rec("u2", 1) == 0 || rec("u2", 1) != 0 || rec("u1", 1) != 0 {
		t.Error("u2: want recorded once, u1 still once")
	}
	if rec("u2", 2) == 0 || rec("u2", 2) != 0 || rec("u1", 2) == 0 {
		t.Error("epoch 2: want each recorded once again")
	}
	if n := countEvents(t, s.db, w.RuntimeID, ContainerExited); n != 4 {
		t.Errorf("%d ContainerExited events, want 4", n)
	}
}

// A process of a binary of schema 8 still running after a newer one
// migrated inserts events as it did (no prev, INSERT OR IGNORE relying on
// events_key): the migration's triggers append them to the record's chain,
// keep its once-per-object-and-epoch rule, and this binary's writer and
// history see them as its own.
func TestOlderWriterEventsJoinTheChain(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	w := workload("default", "job", "j")
	w.UID = "u1"
	mustPut(t, s, w)
	older := func(typ EventType, uid string, observed bool) {
		t.Helper()
		if _, err := s.db.ExecContext(ctx, `INSERT OR IGNORE INTO events (runtime_id, type, message, uid, epoch, observed, time, reason, exit_code, started_at, finished_at)
VALUES (?, ?, '', ?, 1, ?, ?, '', NULL, NULL, NULL)`, w.RuntimeID, string(typ), uid, observed, toDB(t0)); err != nil {
			t.Fatal(err)
		}
	}
	older(ContainerStarted, "u1", true)
	older(ContainerStarted, "u1", true) // ignored, as events_key did
	older(ContainerWaiting, "u1", false)

	// This binary's writer: its ContainerStarted of the same object and
	// epoch is a duplicate; its ContainerExited is new and goes after the
	// older process's events.
	if seq, err := execEvent(ctx, s, w.RuntimeID, string(ContainerStarted), "", "u1", 1, true, int64(0), "", nil, nil, nil); err != nil || seq != 0 {
		t.Errorf("ContainerStarted after the older process's = seq %d, %v; want skipped", seq, err)
	}
	if seq, err := execEvent(ctx, s, w.RuntimeID, string(ContainerExited), "", "u1", 1, true, int64(0), "", nil, nil, nil); err != nil || seq == 0 {
		t.Errorf("ContainerExited = seq %d, %v; want recorded", seq, err)
	}
	older(ContainerExited, "u1", true) // the older process's duplicate of this binary's

	evs, err := s.Events(ctx, w.RuntimeID)
	if err != nil {
		t.Fatal(err)
	}
	var got []EventType
	for _, e := range evs {
		got = append(got, e.Type)
	}
	want := []EventType{Created, ContainerStarted, ContainerWaiting, ContainerExited}
	if !cmp.Equal(got, want) {
		t.Errorf("history %v, want %v", got, want)
	}
	var all, orphans int
	if err := s.db.QueryRowContext(ctx, "SELECT count(*), count(*) FILTER (WHERE prev = -1) FROM events").Scan(&all, &orphans); err != nil {
		t.Fatal(err)
	}
	if all != len(want) || orphans != 0 {
		t.Errorf("%d events (%d without prev), want %d, all on the chain", all, orphans, len(want))
	}
}
