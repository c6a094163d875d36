package monitor

import (
	"testing"
	"unsafe"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
)

// hostedStore is a Monitor without Run and the job store of namespace ns,
// as informerFor sets them up.
func hostedStore(t *testing.T, ns string) (*Monitor, *wstore) {
	t.Helper()
	m := New(fake.NewClientset(), nil, Options{Owner: owner("a")})
	ws := newWstore("job", ns, compact, subsHost{m}, func(any, bool) {})
	m.wstores[ns+"|job"] = ws
	return m, ws
}

// cachedUID is the UID ws holds for ns/name ("" none).
func cachedUID(t *testing.T, ws *wstore, ns, name string) string {
	t.Helper()
	got, ok := ws.get(ns, name)
	if !ok {
		return ""
	}
	return got.(*compacted).uid
}

// TestCacheEntryInSubscription: the cache entry of a subscribed object is
// the subscription's own field, not an entry and a key of the workload
// store's map (one struct per ID); it outlives the subscription (moved
// back into the store's map when the ID is finished, under a substring of
// its ID), an ID added again takes it back, and an object stored before its
// ID was added moves into the subscription.
func TestCacheEntryInSubscription(t *testing.T) {
	m, ws := hostedStore(t, "ns")
	id, early := jobID("ns", "task"), jobID("ns", "early")
	m.Add(id)
	if err := ws.Add(job("ns", "task", "u1", batchv1.JobStatus{Active: 1})); err != nil {
		t.Fatal(err)
	}
	if err := ws.Add(job("ns", "early", "u2", batchv1.JobStatus{Active: 1})); err != nil {
		t.Fatal(err)
	}
	sub := m.subs.get(id.String())
	if !sub.e.hosted || sub.e.uid != "u1" || len(ws.items) != 1 || ws.items["ns|job|early"] == nil {
		t.Fatalf("subscribed ns/task: entry %+v, store's own %d; want it in the subscription, only ns/early in the store's map", sub.e, len(ws.items))
	}
	if got := cachedUID(t, ws, "ns", "task"); got != "u1" || ws.len() != 2 {
		t.Errorf("get ns/task: UID %q, %d held; want u1, 2", got, ws.len())
	}

	m.Add(early)
	if e := m.subs.get(early.String()).e; !e.hosted || e.uid != "u2" || len(ws.items) != 0 {
		t.Errorf("added after its object was cached: entry %+v, store's own %d; want it moved into the subscription", e, len(ws.items))
	}

	m.finish(id.String(), true)
	e := ws.items["ns|job|task"]
	if e == nil || e.hosted || e.uid != "u1" || cachedUID(t, ws, "ns", "task") != "u1" {
		t.Fatalf("after the ID finished: store's entry %+v; want ns/task (u1) kept in the store's map", e)
	}
	for k := range ws.items {
		if k == "ns|job|task" && unsafe.StringData(k) != unsafe.StringData(sub.id[len(id.Runtime)+1:]) {
			t.Errorf("the key moved back is a string of its own, not a substring of the ID")
		}
	}
	if sub.e != (wentry{}) {
		t.Errorf("the finished subscription keeps %+v", sub.e)
	}

	m.Add(id)
	if e := m.subs.get(id.String()).e; !e.hosted || e.uid != "u1" || len(ws.items) != 0 {
		t.Errorf("added again: entry %+v, store's own %d; want it in the new subscription", e, len(ws.items))
	}

	// Updated and deleted through the subscription's entry.
	if err := ws.Update(job("ns", "task", "u3", batchv1.JobStatus{Succeeded: 1})); err != nil {
		t.Fatal(err)
	}
	if got := cachedUID(t, ws, "ns", "task"); got != "u3" || len(ws.items) != 0 {
		t.Errorf("after an update: UID %q, store's own %d; want u3 in the subscription", got, len(ws.items))
	}
	if err := ws.Delete(job("ns", "task", "u3", batchv1.JobStatus{})); err != nil {
		t.Fatal(err)
	}
	if _, ok := ws.get("ns", "task"); ok || m.subs.get(id.String()).e.hosted || ws.len() != 1 {
		t.Errorf("after Delete: still held (%v), or hosted (%v), %d held; want gone, 1 held", ok, m.subs.get(id.String()).e.hosted, ws.len())
	}
}

// TestCacheEntryTwoRuntimes: two runtime IDs of one object share one
// entry; when the one hosting it finishes, the other takes it.
func TestCacheEntryTwoRuntimes(t *testing.T) {
	m, ws := hostedStore(t, "ns")
	k8s := jobID("ns", "task")
	k3s := k8s
	k3s.Runtime = runtimeid.RuntimeK3s
	m.Add(k8s, k3s)
	if err := ws.Add(job("ns", "task", "u1", batchv1.JobStatus{Active: 1})); err != nil {
		t.Fatal(err)
	}
	a, b := m.subs.get(k8s.String()), m.subs.get(k3s.String())
	if a.e.hosted == b.e.hosted || ws.len() != 1 {
		t.Fatalf("hosted by k8s %v, by k3s %v, %d held; want exactly one, 1", a.e.hosted, b.e.hosted, ws.len())
	}
	host, other := k8s, k3s
	if b.e.hosted {
		host, other = k3s, k8s
	}
	m.finish(host.String(), true)
	if e := m.subs.get(other.String()).e; !e.hosted || e.uid != "u1" || len(ws.items) != 0 {
		t.Errorf("after %s finished: %s's entry %+v, store's own %d; want it moved to %s", host, other, e, len(ws.items), other)
	}
}

// TestCacheEntryRelistSweeps: a relist that no longer lists a subscribed
// object reports it deleted and drops its entry from the subscription; a
// store of another namespace leaves it alone.
func TestCacheEntryRelistSweeps(t *testing.T) {
	m, ws := hostedStore(t, "ns")
	otherNS := newWstore("job", "other", compact, subsHost{m}, func(any, bool) {})
	m.wstores["other|job"] = otherNS
	var deleted []string
	ws.onEvent = func(obj any, gone bool) {
		if _, name, _, _ := identity(obj); gone {
			deleted = append(deleted, name)
		}
	}
	a, b := jobID("ns", "a"), jobID("ns", "b")
	m.Add(a, b)
	running := batchv1.JobStatus{Active: 1}
	if err := ws.Replace([]any{job("ns", "a", "ua", running), job("ns", "b", "ub", running)}, "1"); err != nil {
		t.Fatal(err)
	}
	if err := otherNS.Replace(nil, "1"); err != nil {
		t.Fatal(err)
	}
	if err := otherNS.Replace(nil, "2"); err != nil { // a relist of its own: sweeps nothing of ns
		t.Fatal(err)
	}
	if !m.subs.get(a.String()).e.hosted || !m.subs.get(b.String()).e.hosted {
		t.Fatal("another namespace's relist dropped ns's entries")
	}
	if err := ws.Replace([]any{job("ns", "a", "ua", running)}, "3"); err != nil {
		t.Fatal(err)
	}
	if len(deleted) != 1 || deleted[0] != "b" || m.subs.get(b.String()).e.hosted || !m.subs.get(a.String()).e.hosted || ws.len() != 1 {
		t.Errorf("after the relist: deleted %v, b hosted %v, %d held; want [b], false, 1", deleted, m.subs.get(b.String()).e.hosted, ws.len())
	}
}
