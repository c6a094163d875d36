package store

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestMigrateSchema6 opens a file written by schema 6 (workloads a rowid
// table, rows in the order they were created) whose records reference
// events, clusters and revisions: schema 7 rebuilds the table in the
// order of the runtime IDs and keeps every row of every table, the
// references (foreign keys still on, still cascading), and the records as
// the API reads them.
func TestMigrateSchema6(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range migrations[:6] {
		if _, err := db.ExecContext(ctx, m.sql); err != nil {
			t.Fatal(err)
		}
	}
	const n = 400
	order := rand.New(rand.NewPCG(1, 2)).Perm(n) // created in no particular order
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range order {
		id := fmt.Sprintf("k8s-ns-%d|job|w-%03d", i%7, i)
		exit := any(nil)
		if i%3 == 0 {
			exit = i
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO workloads (runtime_id, runtime, namespace, kind, name, uid, spec, state, message,
			epoch, request, expect, created_at, updated_at, reason, exit_code, started_at, finished_at)
			VALUES (?, 'k8s', ?, 'job', ?, ?, ?, 'running', ?, 2, 'StartRequested', '', ?, ?, 'r', ?, ?, NULL)`,
			id, fmt.Sprintf("ns-%d", i%7), fmt.Sprintf("w-%03d", i), fmt.Sprintf("uid-%d", i),
			fmt.Sprintf(`{"name":"w-%03d","image":"img:%d"}`, i, i), fmt.Sprintf("msg %d", i), 1000+i, 2000+i, exit, 3000+i); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO events (runtime_id, type, message, uid, epoch, observed, time) VALUES
			(?, 'Created', '', ?, 1, 0, 1), (?, 'ContainerStarted', '', ?, 2, 1, 2)`, id, fmt.Sprintf("uid-%d", i), id, fmt.Sprintf("uid-%d", i)); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO clusters (runtime_id, cluster) VALUES (?, ?)", id, fmt.Sprintf("c%d", i%2)); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO revisions (runtime_id, revision, spec, created_at) VALUES (?, 1, '{}', 5)", id); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "PRAGMA user_version = 6"); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s, _ := openAt(t, path)
	if v, err := s.SchemaVersion(ctx); err != nil || v != SchemaLatest() {
		t.Fatalf("schema %d, %v; want %d", v, err, SchemaLatest())
	}
	for table, want := range map[string]int{"workloads": n, "events": 2 * n, "clusters": n, "revisions": n} {
		var got int
		if err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+table).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%d rows in %s after the migration, want %d", got, table, want)
		}
	}
	for _, i := range []int{0, 1, 199, n - 1} {
		id := fmt.Sprintf("k8s-ns-%d|job|w-%03d", i%7, i)
		w, err := s.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		started := time.Unix(0, int64(3000+i)).UTC()
		want := Workload{RuntimeID: id, Runtime: "k8s", Namespace: fmt.Sprintf("ns-%d", i%7), Kind: "job", Name: fmt.Sprintf("w-%03d", i),
			UID: fmt.Sprintf("uid-%d", i), State: StateRunning, Message: fmt.Sprintf("msg %d", i), Epoch: 2, Request: StartRequested,
			CreatedAt: time.Unix(0, int64(1000+i)).UTC(), UpdatedAt: time.Unix(0, int64(2000+i)).UTC(),
			Result: Result{Reason: "r", StartedAt: &started}}
		want.Spec.Name, want.Spec.Image = fmt.Sprintf("w-%03d", i), fmt.Sprintf("img:%d", i)
		if i%3 == 0 {
			code := int32(i)
			want.Result.ExitCode = &code
		}
		if diff := cmp.Diff(want, w); diff != "" {
			t.Errorf("record %s after the migration (-want +got):\n%s", id, diff)
		}
	}
	// The rows are the table's key order now: there is no rowid.
	if _, err := s.db.ExecContext(ctx, "SELECT rowid FROM workloads LIMIT 1"); err == nil {
		t.Error("workloads still has a rowid, want a table clustered by runtime_id")
	}
	var bad int
	if err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM pragma_foreign_key_check").Scan(&bad); err != nil || bad != 0 {
		t.Errorf("foreign key check: %d violations, %v", bad, err)
	}
	// Every connection of the pool has foreign keys on again, the
	// migration's too: hold them all at once.
	var conns []*sql.Conn
	for range maxOpenConns {
		c, err := s.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		var on int
		if err := c.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&on); err != nil || on != 1 {
			t.Errorf("connection %d: foreign_keys = %d, %v; want 1", len(conns), on, err)
		}
	}
	for _, c := range conns {
		c.Close()
	}
	// The references still hold and cascade.
	if _, err := s.db.ExecContext(ctx, "INSERT INTO clusters (runtime_id, cluster) VALUES ('k8s-none|job|x', 'c')"); err == nil {
		t.Error("a cluster row for no record was inserted, want a foreign key error")
	}
	if err := s.Forget(ctx, "k8s-ns-0|job|w-000", 2); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"clusters", "revisions"} {
		var left int
		if err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+table+" WHERE runtime_id = 'k8s-ns-0|job|w-000'").Scan(&left); err != nil || left != 0 {
			t.Errorf("%d %s rows of a forgotten record, %v; want 0 (cascade)", left, table, err)
		}
	}
	if err := s.IntegrityCheck(ctx); err != nil {
		t.Error(err)
	}
}

// TestStreamBatchPages: a batch of recover in the stream's order (a run of
// neighbouring runtime IDs) over records created in another order writes a
// few dozen pages to the write-ahead log, not one or more per record as
// when the records sat in the order they were created (a batch of 256 then
// wrote ~310 frames).
func TestStreamBatchPages(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s, _ := openAt(t, path)
	const n, batch = 4000, 256
	ids := make([]string, n)
	err := s.write(ctx, func(tx *sql.Tx) error {
		for _, i := range rand.New(rand.NewPCG(3, 4)).Perm(n) {
			w := workload(fmt.Sprintf("ns-%02d", i%20), "deployment", fmt.Sprintf("w-%05d", i))
			ids[i] = w.RuntimeID
			if _, err := tx.ExecContext(ctx, "INSERT INTO workloads ("+workloadColumns+") VALUES (?, 'k8s', ?, 'deployment', ?, 'u', ?, 'created', '', 1, 'Created', '', 0, 0, '', NULL, NULL, NULL)",
				w.RuntimeID, w.Namespace, w.Name, `{"name":"`+w.Name+`","image":"nginx:1.27","workloadKind":"deployment","env":{"A":"1"}}`); err != nil {
				return err
			}
			if _, err := execEventTx(ctx, tx, w.RuntimeID, string(Created), "", "u", 1, false, 0, "", nil, nil, nil); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The stream's order: namespace, then name.
	var stream []string
	for ns := range 20 {
		for i := ns; i < n; i += 20 {
			stream = append(stream, ids[i])
		}
	}
	if _, err := s.db.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		t.Fatal(err)
	}
	var ts []Transition
	for _, id := range stream[1000 : 1000+batch] {
		ts = append(ts, Transition{RuntimeID: id, Type: ContainerStarted, UID: "u", Message: "1/1 ready"})
	}
	as, err := s.ApplyBatchNoSpecs(ctx, ts)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range as {
		if !a.Applied {
			t.Fatalf("%s not applied", a.Event.RuntimeID)
		}
	}
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	var page int64
	if err := s.db.QueryRowContext(ctx, "PRAGMA page_size").Scan(&page); err != nil {
		t.Fatal(err)
	}
	frames := (fi.Size() - 32) / (page + 24)
	t.Logf("%d WAL frames for a batch of %d", frames, batch)
	if frames > batch/4 {
		t.Errorf("a batch of %d neighbouring records wrote %d pages, want at most %d", batch, frames, batch/4)
	}
}
