package monitor

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// suspended is a Job created suspended, as its controller marks it: no
// pod ever.
func suspended(ns, name, uid string) *batchv1.Job {
	j := job(ns, name, uid, batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobSuspended, Status: corev1.ConditionTrue}}})
	j.Spec.Suspend = ptr.To(true)
	return j
}

// TestReconcileRecordsIdleObjectsBeforeThePods: the objects that cannot
// have pods (a suspended job, a deployment at 0) are recorded while the
// pods still stream; the one that may (a running job) waits for them and
// gets its pod's waiting reason.
func TestReconcileRecordsIdleObjectsBeforeThePods(t *testing.T) {
	st := newStore(t)
	ids := map[string]runtimeid.ID{"idle": jobID("ns", "idle"), "zero": deployID("ns", "zero"), "run": jobID("ns", "run")}
	for name, id := range ids {
		record(t, st, id, "u-"+name, store.StateCreated)
	}
	pod := ownedPod("ns", "run-1", "run", metav1.OwnerReference{Kind: "Job", Name: "run", UID: "u-run"}, 0, waitingStatus("ImagePullBackOff", "Back-off pulling image"))
	client := fake.NewClientset(
		suspended("ns", "idle", "u-idle"),
		deployment("ns", "zero", "u-zero", 0, appsv1.DeploymentStatus{}),
		job("ns", "run", "u-run", batchv1.JobStatus{Active: 1}),
		pod)
	// The pods' list answers empty pages (a paginated list goes on: the
	// fake holds its lock while a reactor runs, so it cannot block) until
	// the idle records have been recorded, then the pod.
	spins := 0
	var during map[string]store.State
	client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, kruntime.Object, error) {
		got := map[string]store.State{}
		for name, id := range ids {
			w, err := st.Get(t.Context(), id.String())
			if err != nil {
				return true, nil, err
			}
			got[name] = w.State
		}
		if got["idle"] != store.StateCreated && got["zero"] != store.StateCreated {
			during = got
			return false, nil, nil
		}
		if spins++; spins > 100_000 {
			return true, nil, fmt.Errorf("the idle objects were not recorded while the pods streamed: %v", got)
		}
		runtime.Gosched()
		return true, &corev1.PodList{ListMeta: metav1.ListMeta{Continue: fmt.Sprint(spins)}}, nil
	})
	if _, err := Reconcile(t.Context(), client, st, ReconcileOptions{Owner: owner("a"), Runtimes: []string{runtimeid.RuntimeK8s}}); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]store.State{"idle": store.StatePaused, "zero": store.StateExited, "run": store.StateCreated}, during); d != "" {
		t.Errorf("states while the pods streamed (-want +got):\n%s", d)
	}
	h := history(t, st, ids["run"])
	if want := []string{"Created  u-run", "ContainerStarted  u-run", "ContainerWaiting Back-off pulling image u-run"}; !cmp.Equal(h, want) {
		t.Errorf("running job: history %q, want %q (recorded after the pods, with its pod's reason)", h, want)
	}
}

// TestReconcileHeldBatchWaitsForThePods: objects that may have pods are
// held back at most a batch a kind; past that the writer waits for the
// pods, as before, and every object is recorded once, in its stream's order.
func TestReconcileHeldBatchWaitsForThePods(t *testing.T) {
	st := newStore(t)
	const n = batchSize + 50
	objs := make([]kruntime.Object, 0, n)
	for i := range n {
		name := fmt.Sprintf("task-%04d", i)
		objs = append(objs, job("ns", name, "u-"+name, batchv1.JobStatus{Active: 1, Ready: ptr.To(int32(1))}))
		record(t, st, jobID("ns", name), "u-"+name, store.StateCreated)
	}
	client := fake.NewClientset(objs...)
	sum, err := Reconcile(t.Context(), client, st, ReconcileOptions{Owner: owner("a"), Runtimes: []string{runtimeid.RuntimeK8s}})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Changed != n {
		t.Errorf("changed %d, want %d", sum.Changed, n)
	}
	for i := range n {
		if s := state(t, st, jobID("ns", fmt.Sprintf("task-%04d", i))); s != store.StateRunning {
			t.Fatalf("task-%04d: %s, want running", i, s)
		}
	}
}

// TestHoldKeepsOrderAndIDs: hold moves the objects that may have pods and
// any whose name is held already, with their IDs in every runtime, and
// keeps the rest in order.
func TestHoldKeepsOrderAndIDs(t *testing.T) {
	r := &reconciler{o: ReconcileOptions{Runtimes: []string{"a", "b"}}}
	b := &batch{kind: runtimeid.KindJob}
	add := func(b *batch, name string, pods bool) {
		b.items = append(b.items, streamed{ns: "ns", name: name, pods: pods})
		b.ids = append(b.ids, "a/"+name, "b/"+name)
	}
	add(b, "one", false)
	add(b, "two", true)
	add(b, "three", false)
	add(b, "four", true)
	held := &batch{kind: runtimeid.KindJob}
	keys := map[uint64]struct{}{}
	r.hold(b, held, keys)
	names := func(b *batch) (out []string) {
		for _, it := range b.items {
			out = append(out, it.name)
		}
		return out
	}
	if d := cmp.Diff([]string{"one", "three"}, names(b)); d != "" {
		t.Errorf("kept (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"a/one", "b/one", "a/three", "b/three"}, b.ids); d != "" {
		t.Errorf("kept IDs (-want +got):\n%s", d)
	}
	// A later batch: "two" again (a stream tried again) goes after its
	// first copy even though it has no pods now.
	b2 := &batch{kind: runtimeid.KindJob}
	add(b2, "five", false)
	add(b2, "two", false)
	r.hold(b2, held, keys)
	if d := cmp.Diff([]string{"five"}, names(b2)); d != "" {
		t.Errorf("kept of the second batch (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"two", "four", "two"}, names(held)); d != "" {
		t.Errorf("held (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"a/two", "b/two", "a/four", "b/four", "a/two", "b/two"}, held.ids); d != "" {
		t.Errorf("held IDs (-want +got):\n%s", d)
	}
}

// TestMayHavePods: only a deployment its controller saw at 0 with no pod
// and a suspended job that never had one are known to have no pod.
func TestMayHavePods(t *testing.T) {
	zero := func(mod func(*appsv1.Deployment)) *appsv1.Deployment {
		d := deployment("ns", "d", "u", 0, appsv1.DeploymentStatus{})
		mod(d)
		return d
	}
	susp := func(mod func(*batchv1.Job)) *batchv1.Job {
		j := suspended("ns", "j", "u")
		mod(j)
		return j
	}
	for _, tc := range []struct {
		name string
		obj  any
		want bool
	}{
		{"deployment at 0", zero(func(*appsv1.Deployment) {}), false},
		{"deployment at 1", deployment("ns", "d", "u", 1, appsv1.DeploymentStatus{}), true},
		{"deployment with no replicas set (1 by default)", zero(func(d *appsv1.Deployment) { d.Spec.Replicas = nil }), true},
		{"deployment scaled to 0, pods left", zero(func(d *appsv1.Deployment) { d.Status.Replicas = 2 }), true},
		{"deployment scaled to 0, pods terminating", zero(func(d *appsv1.Deployment) { d.Status.TerminatingReplicas = ptr.To(int32(1)) }), true},
		{"deployment scaled to 0, not yet seen by its controller", zero(func(d *appsv1.Deployment) { d.Generation = 3; d.Status.ObservedGeneration = 2 }), true},
		{"suspended job", susp(func(*batchv1.Job) {}), false},
		{"job not suspended", job("ns", "j", "u", batchv1.JobStatus{}), true},
		{"suspended job, pods active", susp(func(j *batchv1.Job) { j.Status.Active = 1 }), true},
		{"suspended job that failed a pod", susp(func(j *batchv1.Job) { j.Status.Failed = 1 }), true},
		{"suspended job that finished a pod", susp(func(j *batchv1.Job) { j.Status.Succeeded = 1 }), true},
		{"suspended job, pods terminating", susp(func(j *batchv1.Job) { j.Status.Terminating = ptr.To(int32(1)) }), true},
		{"suspended job, pods ready", susp(func(j *batchv1.Job) { j.Status.Ready = ptr.To(int32(1)) }), true},
		{"another kind", &appsv1.StatefulSet{}, true},
	} {
		if got := mayHavePods(tc.obj); got != tc.want {
			t.Errorf("%s: mayHavePods %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestReconcileIdleRecordsReadNoNotesWhilePodsStream: while the pods'
// stream fills the notes, the writer recording idle objects does not read
// them (run with -race: a lookup per object, as the writer does once the
// pods have ended, is a concurrent map read and write).
func TestReconcileIdleRecordsReadNoNotesWhilePodsStream(t *testing.T) {
	st := newStore(t)
	const n = 3 * batchSize
	objs := make([]kruntime.Object, 0, n)
	for i := range n {
		name := fmt.Sprintf("idle-%04d", i)
		objs = append(objs, suspended("ns", name, "u-"+name))
		record(t, st, jobID("ns", name), "u-"+name, store.StateRunning)
	}
	client := fake.NewClientset(objs...)
	// Pods of other jobs, one a page, until every idle record is recorded.
	page := 0
	client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, kruntime.Object, error) {
		w, err := st.Get(t.Context(), jobID("ns", fmt.Sprintf("idle-%04d", n-1)).String())
		if err != nil {
			return true, nil, err
		}
		if w.State != store.StateRunning || page > 100_000 {
			return true, &corev1.PodList{}, nil
		}
		page++
		owner := metav1.OwnerReference{Kind: "Job", Name: fmt.Sprintf("other-%d", page), UID: types.UID(fmt.Sprintf("u-other-%d", page))}
		p := ownedPod("ns", fmt.Sprintf("other-%d", page), owner.Name, owner, 0, waitingStatus("ImagePullBackOff", ""))
		runtime.Gosched()
		return true, &corev1.PodList{ListMeta: metav1.ListMeta{Continue: fmt.Sprint(page)}, Items: []corev1.Pod{*p}}, nil
	})
	sum, err := Reconcile(t.Context(), client, st, ReconcileOptions{Owner: owner("a"), Runtimes: []string{runtimeid.RuntimeK8s}})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Changed != n {
		t.Errorf("changed %d, want %d", sum.Changed, n)
	}
	if page == 0 {
		t.Error("no pod was streamed")
	}
}
