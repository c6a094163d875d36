package store

import (
	"context"
	"testing"
	"time"
)

// TestPrepareWrites: after PrepareWrites, a pass's transactions (ApplyFree
// reads the records and the leases, inserts events and updates the
// records) run on the one connection the store had, with every statement
// prepared there already. Without it, the first transaction prepared each
// statement on a second connection opened for it, then again on its own.
func TestPrepareWrites(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	var ids []string
	for _, n := range []string{"a", "b", "c"} {
		w := workload("ns", "job", n)
		mustPut(t, s, w)
		ids = append(ids, w.RuntimeID)
	}
	if n := s.db.Stats().OpenConnections; n != 1 {
		t.Fatalf("%d connections open before the pass, want 1", n)
	}
	if err := s.PrepareWrites(ctx); err != nil {
		t.Fatal(err)
	}
	all := func(string, Head) bool { return true }
	for round := range 2 {
		_, free, res, err := s.ApplyFree(ctx, liveOwner("me"), ids, time.Minute, all, func(heads map[string]Head, free []string) FreeBatch {
			var fb FreeBatch
			for _, id := range free {
				typ := ContainerStarted
				if round == 1 {
					typ = ContainerExited
				}
				fb.Transitions = append(fb.Transitions, Transition{RuntimeID: id, Type: typ, UID: "uid-" + id})
			}
			return fb
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(free) != len(ids) || len(res) != len(ids) || !res[0].Applied {
			t.Fatalf("round %d: free %v, results %+v; want every ID leased and its event recorded", round, free, res)
		}
	}
	if n := s.db.Stats().OpenConnections; n != 1 {
		t.Errorf("%d connections open after the pass, want 1: a statement was prepared inside a transaction", n)
	}
	for _, id := range ids {
		if w, err := s.Get(ctx, id); err != nil || w.State != StateExited {
			t.Errorf("%s: %s, %v; want exited", id, w.State, err)
		}
	}
}
