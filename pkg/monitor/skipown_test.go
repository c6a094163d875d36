package monitor

import (
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// TestWriterSkipsItsOwnEvents: after a batch the history poll's position
// is past the events the writer has just recorded, so the poll does not
// read them back; an event of another process in between keeps the
// position before it, and the poll then reads it and what follows.
func TestWriterSkipsItsOwnEvents(t *testing.T) {
	ctx := t.Context()
	st := newStore(t)
	a, b := jobID("ns", "a"), jobID("ns", "b")
	record(t, st, a, "ua", store.StateStarting)
	record(t, st, b, "ub", store.StateStarting)
	lastSeq := func() int64 {
		t.Helper()
		n, err := st.LastEventSeq(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	m := New(fake.NewClientset(), st, Options{Owner: owner("a")})
	m.Add(a, b)
	first := lastSeq()
	m.seqSet, m.nHeld, m.lastSeq = true, 2, first
	started := func(id, uid string) []item {
		return []item{{ids: []string{id}, obs: Observation{Type: store.ContainerStarted, UID: uid}, at: time.Now()}}
	}

	if err := m.record(ctx, started(a.String(), "ua")); err != nil {
		t.Fatal(err)
	}
	if lastSeq() == first {
		t.Fatal("the writer recorded no event")
	}
	if got, want := m.lastSeq, lastSeq(); got != want {
		t.Fatalf("after the writer's own event the poll's position is %d, want %d (past it)", got, want)
	}

	before := m.lastSeq
	record(t, st, jobID("ns", "other"), "", store.StateCreated) // another process's request
	if err := m.record(ctx, started(b.String(), "ub")); err != nil {
		t.Fatal(err)
	}
	if m.lastSeq != before {
		t.Fatalf("the poll's position moved from %d to %d, past another process's event", before, m.lastSeq)
	}
	m.follow(ctx)
	if got, want := m.lastSeq, lastSeq(); got != want {
		t.Errorf("after the poll the position is %d, want %d", got, want)
	}
}
