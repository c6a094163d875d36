package monitor

import (
	"context"
	"fmt"
	"slices"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// register takes the leases of the pending IDs a chunk at a time: the IDs
// of a monitor --all arrive faster than they are registered, and one
// AcquireLeases of all of them (a JSON array of every ID parsed by SQLite,
// every lease written in one transaction, a map and a copy of every ID)
// was the start's counterpart of the exit's ReleaseLeases spike. Every ID
// is still leased and watched, each once.
func TestRegisterAcquiresLeasesInChunks(t *testing.T) {
	st := newStore(t)
	const n = 10
	var objs []runtime.Object
	var want []string
	m := New(nil, st, Options{Owner: owner("a"), Follow: true})
	for i := range n {
		name, uid := fmt.Sprintf("task-%d", i), fmt.Sprintf("u%d", i)
		id := jobID("ns", name)
		record(t, st, id, uid, store.StateRunning)
		objs = append(objs, job("ns", name, uid, batchv1.JobStatus{Active: 1}))
		m.Add(id) // all pending before Run: one register call
		want = append(want, id.String())
	}
	m.client = fake.NewClientset(objs...)
	m.registerChunk = 3
	var chunks [][]string
	m.onAcquire = func(ids []string) { chunks = append(chunks, slices.Clone(ids)) }

	ctx, cancel := context.WithCancel(t.Context())
	done := start(ctx, m)
	eventually(t, "every lease held", func() bool { return m.heldCount() == n })
	cancel()
	if r := await(t, done); r.err != nil {
		t.Fatal(r.err)
	}

	var got []string
	for _, c := range chunks {
		if len(c) > m.registerChunk {
			t.Errorf("acquired %d leases in one transaction, want at most %d", len(c), m.registerChunk)
		}
		got = append(got, c...)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("acquired %v, want each of %v once", got, want)
	}
}
