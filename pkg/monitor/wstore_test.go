package monitor

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// TestWstoreReplace: the first Replace reports nothing (the snapshot reads
// the store); after it, each change is reported, and a relist reports
// every object it lists and, deleted, every object held that it does not
// list (gone while the watch was down), with its last UID.
func TestWstoreReplace(t *testing.T) {
	type ev struct {
		name, uid string
		deleted   bool
	}
	var got []ev
	s := newWstore("job", "", compact, nil, func(obj any, deleted bool) {
		_, name, uid, _ := identity(obj)
		got = append(got, ev{name, uid, deleted})
	})
	running := batchv1.JobStatus{Active: 1}
	if err := s.Replace([]any{job("ns", "a", "ua", running), job("ns", "b", "ub", running)}, "1"); err != nil {
		t.Fatal(err)
	}
	if !s.HasSynced() || len(got) != 0 || s.len() != 2 {
		t.Fatalf("after the first Replace: synced %v, %d events, %d held; want true, 0, 2", s.HasSynced(), len(got), s.len())
	}
	if err := s.Add(job("ns", "c", "uc", running)); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(job("ns", "a", "ua", batchv1.JobStatus{Succeeded: 1})); err != nil {
		t.Fatal(err)
	}
	// Relisted: b and c are gone, a is there.
	if err := s.Replace([]any{job("ns", "a", "ua", running)}, "2"); err != nil {
		t.Fatal(err)
	}
	want := []ev{{"c", "uc", false}, {"a", "ua", false}, {"a", "ua", false}}
	if len(got) != 5 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("events %v, want %v then b and c deleted", got, want)
	}
	gone := map[ev]bool{got[3]: true, got[4]: true}
	if !gone[ev{"b", "ub", true}] || !gone[ev{"c", "uc", true}] {
		t.Errorf("relist reported %v, want b (ub) and c (uc) deleted", got[3:])
	}
	if s.len() != 1 {
		t.Errorf("%d held after the relist, want 1", s.len())
	}
	if o, ok := s.get("ns", "a"); !ok {
		t.Error("a not held after the relist")
	} else if obs, _ := observe(o); obs.Type != store.ContainerStarted {
		t.Errorf("a's observation %v after the relist, want the relisted one (started)", obs)
	}
	if err := s.Delete(job("ns", "a", "ua", running)); err != nil {
		t.Fatal(err)
	}
	if last := got[len(got)-1]; last != (ev{"a", "ua", true}) || s.len() != 0 {
		t.Errorf("after Delete: last event %v, %d held; want a deleted, 0", last, s.len())
	}
}

// TestRelistAfterExpiredWatchRecordsDeleted: the watch expires (410) while
// a job is deleted; the relist that follows records it ContainerDeleted,
// and the job still there stays as it was.
func TestRelistAfterExpiredWatchRecordsDeleted(t *testing.T) {
	st := newStore(t)
	a, b := jobID("ns", "task-a"), jobID("ns", "task-b")
	record(t, st, a, "ua", store.StateRunning)
	record(t, st, b, "ub", store.StateRunning)
	running := batchv1.JobStatus{Active: 1}
	client := fake.NewClientset(job("ns", "task-a", "ua", running), job("ns", "task-b", "ub", running))
	first := watch.NewFake()
	handed := make(chan struct{})
	watches := 0
	client.PrependWatchReactor("jobs", func(k8stesting.Action) (bool, watch.Interface, error) {
		watches++
		if watches == 1 {
			close(handed)
			return true, first, nil
		}
		return false, nil, nil
	})
	events := make(chan store.Event, 16)
	m := New(client, st, Options{Owner: owner("a"), Follow: true, OnEvent: func(e store.Event) { events <- e }})
	m.Add(a, b)
	ctx, cancel := context.WithCancel(t.Context())
	done := start(ctx, m)
	defer func() { cancel(); await(t, done) }()
	select {
	case <-handed:
	case <-time.After(30 * time.Second):
		t.Fatal("no watch of jobs")
	}
	// Deleted while the monitor's watch is down: it never sees the event.
	gvr := schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
	if err := client.Tracker().Delete(gvr, "ns", "task-b"); err != nil {
		t.Fatal(err)
	}
	first.Error(&apierrors.NewResourceExpired("too old resource version").ErrStatus)
	deadline := time.After(30 * time.Second)
	for {
		select {
		case e := <-events:
			if e.RuntimeID == a.String() {
				t.Fatalf("event %s for %s, which is still there", e.Type, a)
			}
			if e.RuntimeID == b.String() && e.Type == store.ContainerDeleted {
				if e.UID != "ub" {
					t.Errorf("ContainerDeleted of UID %q, want ub", e.UID)
				}
				return
			}
		case <-deadline:
			t.Fatal("task-b, deleted while the watch was down, was not recorded ContainerDeleted after the relist")
		}
	}
}

// TestWstoreStreamList: a relist that streams stores and reports each
// object as it arrives and returns the bookmark's resource version; the
// Replace the reflector makes then (with no objects) only sweeps: the
// object not streamed is reported deleted.
func TestWstoreStreamList(t *testing.T) {
	type ev struct {
		name    string
		deleted bool
	}
	var got []ev
	s := newWstore("job", "", compact, nil, func(obj any, deleted bool) {
		_, name, _, _ := identity(obj)
		got = append(got, ev{name, deleted})
	})
	running := batchv1.JobStatus{Active: 1}
	if err := s.Replace([]any{job("ns", "a", "ua", running), job("ns", "b", "ub", running)}, "1"); err != nil {
		t.Fatal(err)
	}
	w := watch.NewFakeWithChanSize(4, false)
	w.Add(job("ns", "a", "ua", running))
	w.Add(job("ns", "c", "uc", running))
	w.Action(watch.Bookmark, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "7",
		Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}})
	var opts metav1.ListOptions
	l := lister{watch: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) { opts = o; return w, nil }}
	rv, n, err := s.streamList(t.Context(), l, 10*time.Second)
	if err != nil || rv != "7" || n != 2 {
		t.Fatalf("streamList: rv %q, %d objects, %v; want 7, 2, nil", rv, n, err)
	}
	if opts.SendInitialEvents == nil || !*opts.SendInitialEvents || opts.LabelSelector != WorkloadLabel {
		t.Errorf("watch options %+v, want a label-filtered watch-list", opts)
	}
	if len(got) != 2 || got[0] != (ev{"a", false}) || got[1] != (ev{"c", false}) {
		t.Fatalf("events while streaming %v, want a and c", got)
	}
	if err := s.Replace(nil, rv); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[2] != (ev{"b", true}) {
		t.Errorf("events after Replace %v, want b deleted", got[2:])
	}
	if s.len() != 2 {
		t.Errorf("%d held, want 2 (a, c)", s.len())
	}
	// A typed list after it (a server refusing watch-lists) sweeps as well.
	if err := s.Replace([]any{job("ns", "c", "uc", running)}, "8"); err != nil {
		t.Fatal(err)
	}
	if last := got[len(got)-1]; last != (ev{"a", true}) || s.len() != 1 {
		t.Errorf("after a typed relist: last event %v, %d held; want a deleted, 1", last, s.len())
	}
}
