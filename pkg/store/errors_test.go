package store

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
)

// The error branches of fail, each produced by SQLite itself: root ignores
// file modes (TestOpenReadOnly skips there), so a read-only connection and a
// page limit stand in for a read-only file and a full disk.

// onOneConnection makes s use a single connection and runs pragma on it.
func onOneConnection(t *testing.T, s *Store, pragma string) {
	t.Helper()
	s.db.SetMaxOpenConns(1)
	s.db.SetMaxIdleConns(1)
	if _, err := s.db.Exec(pragma); err != nil {
		t.Fatal(err)
	}
}

func TestWriteReadOnly(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	if err := s.Put(ctx, workload("default", "job", "before"), Transition{Type: Created}); err != nil {
		t.Fatal(err)
	}
	onOneConnection(t, s, "PRAGMA query_only = 1")
	err := s.Put(ctx, workload("default", "job", "after"), Transition{Type: Created})
	for _, want := range []string{s.path, "is not writable", "fix the permissions of the file and its folder or point --state-db elsewhere"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("write to a read-only database: %v, want it to contain %q", err, want)
		}
	}
	// Reads still work, and nothing was half-written.
	if _, err := s.Get(ctx, "k8s-default|job|before"); err != nil {
		t.Errorf("read after a refused write: %v", err)
	}
	if _, err := s.Get(ctx, "k8s-default|job|after"); !errors.Is(err, ErrNotFound) {
		t.Errorf("the refused record: %v, want not found", err)
	}
}

func TestWriteFull(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	var pages int
	if err := s.db.QueryRow("PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	onOneConnection(t, s, "PRAGMA max_page_count = "+strconv.Itoa(pages))
	var err error
	for i := 0; err == nil && i < 1000; i++ {
		err = s.Put(ctx, workload("default", "job", "fill-"+strconv.Itoa(i)), Transition{Type: Created, Message: strings.Repeat("x", 2000)})
	}
	for _, want := range []string{s.path, "free some disk space"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("write to a full database: %v, want it to contain %q", err, want)
		}
	}
	if err := s.IntegrityCheck(ctx); err != nil {
		t.Errorf("after SQLITE_FULL: %v", err)
	}
}

// TestCorruptSpecRow: a record whose spec is not JSON (written by hand or a
// damaged page) fails the reads that decode it with its ID named, and leaves
// the reads that do not (ps) working.
func TestCorruptSpecRow(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	w := workload("default", "job", "broken")
	if err := s.Put(ctx, w, Transition{Type: Created}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec("UPDATE workloads SET spec = '{not json' WHERE runtime_id = ?", w.RuntimeID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, w.RuntimeID); err == nil || !strings.Contains(err.Error(), `decode the spec of "`+w.RuntimeID+`"`) {
		t.Errorf("Get of a corrupt spec: %v, want an error naming the ID", err)
	}
	if _, err := s.List(ctx, Filter{All: true}); err == nil || !strings.Contains(err.Error(), w.RuntimeID) {
		t.Errorf("List with specs: %v, want an error naming the ID", err)
	}
	ws, err := s.List(ctx, Filter{All: true, NoSpec: true})
	if err != nil || len(ws) != 1 || ws[0].RuntimeID != w.RuntimeID {
		t.Errorf("List without specs: %v, %v; want the record", ws, err)
	}
}
