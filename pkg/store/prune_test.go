package store

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// deleteRecord moves a record to deleted as a delete and the monitor do.
func deleteRecord(t *testing.T, s *Store, id string) {
	t.Helper()
	ctx := context.Background()
	for _, typ := range []EventType{DeleteRequested, ContainerDeleted} {
		if _, _, err := s.Apply(ctx, Transition{RuntimeID: id, Type: typ, UID: "uid-" + id}); err != nil {
			t.Fatalf("Apply(%s, %s): %v", id, typ, err)
		}
	}
	w, err := s.Get(ctx, id)
	if err != nil || w.State != StateDeleted {
		t.Fatalf("%s: %s, %v; want deleted", id, w.State, err)
	}
}

func TestPrune(t *testing.T) {
	ctx := context.Background()
	s, clk := openTest(t)
	old, recent, live := workload("a", "job", "old"), workload("a", "job", "recent"), workload("a", "deployment", "live")
	for _, w := range []Workload{old, recent, live} {
		mustPut(t, s, w)
	}
	if err := s.SetCluster(ctx, old.RuntimeID, "https://x"); err != nil {
		t.Fatal(err)
	}
	deleteRecord(t, s, old.RuntimeID)
	clk.add(10 * 24 * time.Hour)
	deleteRecord(t, s, recent.RuntimeID)
	clk.add(time.Hour)

	ids := func(ps []Pruned) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.RuntimeID)
		}
		return out
	}
	// Dry run: what would go, nothing removed.
	got, err := s.Prune(ctx, PruneFilter{Before: clk.now().Add(-7 * 24 * time.Hour), DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{old.RuntimeID}, ids(got)); diff != "" {
		t.Fatalf("dry run (-want +got):\n%s", diff)
	}
	if got[0].Events != 3 {
		t.Errorf("events of %s = %d, want 3", old.RuntimeID, got[0].Events)
	}
	if _, err := s.Get(ctx, old.RuntimeID); err != nil {
		t.Fatalf("dry run removed %s: %v", old.RuntimeID, err)
	}

	got, err = s.Prune(ctx, PruneFilter{Before: clk.now().Add(-7 * 24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{old.RuntimeID}, ids(got)); diff != "" {
		t.Fatalf("prune --older-than 7d (-want +got):\n%s", diff)
	}
	if _, err := s.Get(ctx, old.RuntimeID); err == nil {
		t.Fatalf("%s still recorded", old.RuntimeID)
	}
	if evs, _ := s.Events(ctx, old.RuntimeID); len(evs) != 0 {
		t.Fatalf("%d events of %s left", len(evs), old.RuntimeID)
	}
	if c, _ := s.Cluster(ctx, old.RuntimeID); c != "" {
		t.Fatalf("cluster of %s left: %q", old.RuntimeID, c)
	}

	// Another namespace: nothing.
	if got, err := s.Prune(ctx, PruneFilter{Namespace: "b"}); err != nil || len(got) != 0 {
		t.Fatalf("prune -n b: %v, %v", got, err)
	}
	// No age: every deleted record, never the live one.
	got, err = s.Prune(ctx, PruneFilter{Namespace: "a", Runtime: "k8s"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{recent.RuntimeID}, ids(got)); diff != "" {
		t.Fatalf("prune (-want +got):\n%s", diff)
	}
	if w, err := s.Get(ctx, live.RuntimeID); err != nil || w.State == StateDeleted {
		t.Fatalf("live record: %+v, %v", w, err)
	}
	if evs, _ := s.Events(ctx, live.RuntimeID); len(evs) != 1 {
		t.Fatalf("history of the live record: %d events, want 1", len(evs))
	}
	// The name can be created again and keeps no old history.
	mustPut(t, s, old)
	if evs, _ := s.Events(ctx, old.RuntimeID); len(evs) != 1 {
		t.Fatalf("history of %s created again: %d events, want 1", old.RuntimeID, len(evs))
	}
}

// A record created again under a deleted runtime ID after the dry run
// listed it is not deleted any more and must stay.
func TestPruneKeepsRecreated(t *testing.T) {
	ctx := context.Background()
	s, clk := openTest(t)
	w := workload("a", "job", "again")
	mustPut(t, s, w)
	deleteRecord(t, s, w.RuntimeID)
	clk.add(time.Hour)
	listed, err := s.Prune(ctx, PruneFilter{DryRun: true})
	if err != nil || len(listed) != 1 {
		t.Fatalf("dry run: %v, %v", listed, err)
	}
	mustPut(t, s, w) // create again: state created
	got, err := s.Prune(ctx, PruneFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Fatalf("pruned %v, want nothing", got)
	}
	if r, err := s.Get(ctx, w.RuntimeID); err != nil || r.State != StateCreated {
		t.Fatalf("record: %+v, %v", r, err)
	}
}

// Prune runs while other stores write: it never removes a record that is
// not deleted, whatever it interleaves with.
func TestPruneConcurrentWriter(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	other, err := Open(ctx, s.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	const n = 40
	var ws []Workload
	for i := range n {
		w := workload("c", "job", "j"+string(rune('a'+i%26))+string(rune('a'+i/26)))
		mustPut(t, s, w)
		deleteRecord(t, s, w.RuntimeID)
		ws = append(ws, w)
	}
	done := make(chan error, 1)
	go func() {
		// Re-create every other record while prune runs.
		for i, w := range ws {
			if i%2 == 0 {
				if err := other.Put(ctx, w, Transition{Type: Created, Message: "again"}); err != nil {
					done <- err
					return
				}
			}
		}
		done <- nil
	}()
	if _, err := s.Prune(ctx, PruneFilter{}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for i, w := range ws {
		r, err := s.Get(ctx, w.RuntimeID)
		if i%2 == 0 {
			// Re-created: before prune (kept) or after it (a new record).
			if err != nil || r.State != StateCreated {
				t.Errorf("%s: %+v, %v; want created", w.RuntimeID, r.State, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: still recorded (%s)", w.RuntimeID, r.State)
		}
	}
}
