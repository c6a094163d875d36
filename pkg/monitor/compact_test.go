package monitor

import (
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/gobrave/kubectl-gobrave/pkg/runtime"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// newJob is a labelled job; its namespace and name are fresh strings, as
// decoded from the wire.
func newJob(ns, name, uid string, status batchv1.JobStatus) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: strings.Clone(ns), Name: strings.Clone(name), UID: types.UID(uid), ResourceVersion: "42",
			Labels: map[string]string{WorkloadLabel: name},
		},
		Spec:   batchv1.JobSpec{BackoffLimit: ptr.To(int32(0))},
		Status: status,
	}
}

func compactedOf(t *testing.T, obj any) *compacted {
	t.Helper()
	c, err := compact(obj)
	if err != nil {
		t.Fatal(err)
	}
	cc, ok := c.(*compacted)
	if !ok {
		t.Fatalf("compact(%T) = %T, want *compacted", obj, c)
	}
	return cc
}

// TestCompactedNoObjectMeta: client-go reads a cached entry's key and
// resource version through meta.Accessor, 4-5 times per object during a
// sync; compacted answers itself, where it allocated a 240-byte
// ObjectMeta each time (GetObjectMeta).
func TestCompactedNoObjectMeta(t *testing.T) {
	c := compactedOf(t, newJob("ns", "task", "u1", batchv1.JobStatus{Active: 1, Ready: ptr.To(int32(1))}))
	if allocs := testing.AllocsPerRun(100, func() {
		m, err := meta.Accessor(c)
		if err != nil || m.GetResourceVersion() != "42" || m.GetName() != "task" {
			t.Fatalf("meta.Accessor: %v, %v", m, err)
		}
	}); allocs != 0 {
		t.Errorf("meta.Accessor of a cache entry allocates %.0f times, want 0", allocs)
	}
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(c)
	if err != nil || key != "ns/task" {
		t.Errorf("key %q (%v), want ns/task", key, err)
	}
	if allocs := testing.AllocsPerRun(100, func() { _, _ = cache.MetaNamespaceKeyFunc(c) }); allocs > 1 {
		t.Errorf("a key allocates %.0f times, want only the key", allocs)
	}
	if got := unsafe.Sizeof(compacted{}); got > 96 {
		t.Errorf("a cache entry is %d bytes, want at most 96 (a size class below 128)", got)
	}
}

// TestCompactInterns: entries of one namespace share its string, and
// entries whose observations have the same message and reason share them;
// the observation reads back the same.
func TestCompactInterns(t *testing.T) {
	start := metav1.NewTime(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	end := metav1.NewTime(start.Add(time.Minute))
	done := batchv1.JobStatus{StartTime: &start, CompletionTime: &end, Succeeded: 1,
		Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: end}}}
	failed := func() batchv1.JobStatus {
		return batchv1.JobStatus{StartTime: &start, Failed: 1, Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue,
			Reason: "BackoffLimitExceeded", Message: strings.Clone("Job has reached the specified backoff limit"), LastTransitionTime: end}}}
	}
	running := batchv1.JobStatus{StartTime: &start, Active: 1, Ready: ptr.To(int32(1))}

	objs := []*batchv1.Job{
		newJob("team-a", "j1", "u1", done), newJob("team-a", "j2", "u2", done),
		newJob("team-a", "j3", "u3", failed()), newJob("team-a", "j4", "u4", failed()),
		newJob("team-a", "j5", "u5", running),
	}
	var cs []*compacted
	for _, j := range objs {
		c := compactedOf(t, j)
		want, ok := runtime.Observe(j)
		got, gok := c.observation()
		if diff := cmp.Diff(want, got); ok != gok || diff != "" {
			t.Errorf("%s: observation read back (ok %v, %v; -want +got):\n%s", j.Name, ok, gok, diff)
		}
		cs = append(cs, c)
	}
	for _, c := range cs[1:] {
		if unsafe.StringData(c.namespace) != unsafe.StringData(cs[0].namespace) {
			t.Errorf("%s: namespace %q is a copy of its own", c.name, c.namespace)
		}
	}
	if cs[0].text == nil || cs[0].text != cs[1].text {
		t.Errorf("completed jobs: texts %p and %p, want one shared", cs[0].text, cs[1].text)
	}
	if cs[2].text == nil || cs[2].text != cs[3].text {
		t.Errorf("jobs failed alike: texts %p and %p, want one shared", cs[2].text, cs[3].text)
	}
	if cs[4].text != nil {
		t.Errorf("running job: text %+v, want none", *cs[4].text)
	}
	if o, _ := cs[2].observation(); o.Type != store.ContainerFailed || o.Reason != "BackoffLimitExceeded" {
		t.Errorf("failed job read back %+v", o)
	}
}

// TestSubscriptionWords: a subscription is 96 bytes with the cache entry
// it hosts (its state and flags share the words of its repeat filters; the
// entry's flags its padding), and each part reads back what was set
// whatever the others hold.
func TestSubscriptionWords(t *testing.T) {
	if got := unsafe.Sizeof(subscription{}); got > 96 {
		t.Errorf("a subscription is %d bytes, want at most 96 (a size class below 112)", got)
	}
	if got := unsafe.Sizeof(wentry{}); got > 48 {
		t.Errorf("a cache entry is %d bytes, want at most 48", got)
	}
	s := &subscription{}
	h1 := hashOf(Observation{Type: store.ContainerStarted, UID: "u1"})
	h2 := hashOf(Observation{Type: store.ContainerWaiting, Message: "ImagePullBackOff", UID: "u1"})
	if h1 == 0 || h1 > hashBits || h2 == 0 || h2 > hashBits {
		t.Fatalf("hashes %x, %x: want 56-bit, not 0", h1, h2)
	}
	s.setState(codeOf(store.StateFailed))
	s.set(flagHeld|flagChanged, true)
	s.setLast(h1)
	s.setPodLast(h2)
	s.set(flagWatched, true)
	s.set(flagHeld, false)
	s.setState(codeOf(store.StateRunning))
	if s.last() != h1 || s.podLast() != h2 || s.state() != codeOf(store.StateRunning) ||
		s.flags() != flagChanged|flagWatched {
		t.Errorf("read back last %x pod %x state %d flags %b; want %x %x %d %b",
			s.last(), s.podLast(), s.state(), s.flags(), h1, h2, codeOf(store.StateRunning), flagChanged|flagWatched)
	}
	s.setLast(0)
	s.setPodLast(0)
	if s.last() != 0 || s.podLast() != 0 || s.state() != codeOf(store.StateRunning) || s.flags() != flagChanged|flagWatched {
		t.Errorf("after clearing the filters: last %x pod %x state %d flags %b", s.last(), s.podLast(), s.state(), s.flags())
	}
}
