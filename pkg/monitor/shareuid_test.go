package monitor

import (
	"strings"
	"testing"
	"unsafe"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// A workload informer keeps, as an object's UID, its subscription's string
// (read from the record) when the two are equal, not the decoder's copy:
// one 48-byte string per workload instead of two from the initial list
// until the object's first observation (4.8 MB at 100,000). Another UID
// (a new object of that name) and objects without a subscription keep
// their own.
func TestWorkloadCacheSharesTheSubscriptionsUID(t *testing.T) {
	m := New(fake.NewClientset(), nil, Options{Owner: owner("a")})
	id := jobID("ns", "task")
	m.Add(id)
	recorded := strings.Clone("0d5c6a3e-2f0b-4c59-9f7e-6b1f1f1c9d20")
	m.subs.get(id.String()).uid = recorded

	inf := &informer{namespace: "", kind: "job", shareUID: m.uidFor("job")}
	ws := newWstore("job", "", inf.transform, subsHost{m}, func(any, bool) {})
	same := func(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

	decoded := strings.Clone(recorded) // the decoder's string: equal, not the same
	if err := ws.Add(job("ns", "task", decoded, batchv1.JobStatus{Active: 1})); err != nil {
		t.Fatal(err)
	}
	other := strings.Clone("a2b6a1f0-0000-4000-8000-000000000001")
	if err := ws.Add(job("ns", "other", other, batchv1.JobStatus{Active: 1})); err != nil {
		t.Fatal(err)
	}
	e := &m.subs.get(id.String()).e // hosted by the subscription
	if !e.hosted || e.uid != recorded {
		t.Fatalf("entry of ns/task = %+v, want UID %s", e, recorded)
	}
	if !same(e.uid, recorded) {
		t.Errorf("the cache keeps its own copy of ns/task's UID, not the subscription's string")
	}
	if o := ws.items["ns|job|other"]; o == nil || !same(o.uid, other) {
		t.Errorf("ns/other (no subscription) should keep the decoder's UID, got %+v", o)
	}

	// A new object of the same name: its own UID, not the record's.
	newer := strings.Clone("7f3e2a10-1111-4000-8000-000000000002")
	if err := ws.Update(job("ns", "task", newer, batchv1.JobStatus{Active: 1})); err != nil {
		t.Fatal(err)
	}
	if e := &m.subs.get(id.String()).e; e.uid != newer || !same(e.uid, newer) {
		t.Errorf("after a new UID, entry UID = %q (shared with the record: %v), want the object's %q", e.uid, same(e.uid, recorded), newer)
	}
	if s := m.subs.get(id.String()).uid; !same(s, recorded) {
		t.Errorf("the subscription's UID changed to %q: only the writer's mapping (observeLocked) moves it", s)
	}
}
