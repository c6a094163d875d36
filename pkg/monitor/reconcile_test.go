package monitor

import (
	"errors"
	"hash/fnv"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// TestReconcile: one pass records what each object says, finds the
// objects gone in bulk (no GET per ID), keeps the object whose label was
// removed, tells a recreated object from the recorded one, adds the exit
// code of a failed job from the pods streamed, and leaves alone an ID a
// live process holds. Requests: lists only, one per resource, whatever the
// number of IDs; none names an object.
func TestReconcile(t *testing.T) {
	st := newStore(t)
	running := batchv1.JobStatus{Active: 1, Ready: ptr.To(int32(1))}
	failed := batchv1.JobStatus{Failed: 1, Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"}}}
	objs := []kruntime.Object{
		job("ns", "run", "u-run", running),
		job("ns", "done", "u-done", complete),
		job("ns", "fail", "u-fail", failed),
		ownedPod("ns", "fail-1", "fail", metav1.OwnerReference{Kind: "Job", Name: "fail", UID: "u-fail"}, 0, corev1.PodStatus{Phase: corev1.PodFailed,
			ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}}}}}),
		deployment("ns", "web", "u-web", 1, appsv1.DeploymentStatus{Replicas: 1, ReadyReplicas: 1}),
	}
	unlabelled := job("ns", "unlabelled", "u-unl", running)
	unlabelled.Labels = nil
	objs = append(objs, unlabelled)
	recreated := job("other", "again", "u-new", running) // recorded with u-old, unlabelled now
	recreated.Labels = nil
	objs = append(objs, recreated)
	client := fake.NewClientset(objs...)

	ids := map[string]runtimeid.ID{
		"run": jobID("ns", "run"), "done": jobID("ns", "done"), "fail": jobID("ns", "fail"), "web": deployID("ns", "web"),
		"unlabelled": jobID("ns", "unlabelled"), "again": jobID("other", "again"), "gone": jobID("ns", "gone"),
		"gone-nouid": jobID("ns", "gone-nouid"), "held": jobID("ns", "held"),
	}
	uids := map[string]string{"run": "u-run", "done": "u-done", "fail": "u-fail", "web": "u-web", "unlabelled": "u-unl", "again": "u-old", "gone": "u-gone", "held": "u-held"}
	for name, id := range ids {
		record(t, st, id, uids[name], store.StateCreated)
	}
	other := store.Owner{ID: "other", Host: "test"}
	if _, err := st.AcquireLeases(t.Context(), other, []string{ids["held"].String()}, DefaultLeaseTTL); err != nil {
		t.Fatal(err)
	}
	var c collector
	sum, err := Reconcile(t.Context(), client, st, ReconcileOptions{Owner: owner("a"), Runtimes: []string{runtimeid.RuntimeK8s}, OnEvent: c.on})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]store.State{
		"run": store.StateRunning, "done": store.StateExited, "fail": store.StateFailed, "web": store.StateRunning,
		"unlabelled": store.StateCreated, "again": store.StateDeleted, "gone": store.StateDeleted, "gone-nouid": store.StateDeleted,
		"held": store.StateCreated,
	}
	got := map[string]store.State{}
	for name, id := range ids {
		got[name] = state(t, st, id)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("states (-want +got):\n%s", d)
	}
	if d := cmp.Diff(Summary{Reattached: 8, Changed: 7, Terminal: 5}, sum); d != "" {
		t.Errorf("summary (-want +got):\n%s", d)
	}
	w, err := st.Get(t.Context(), ids["fail"].String())
	if err != nil {
		t.Fatal(err)
	}
	if w.ExitCode == nil || *w.ExitCode != 3 || w.Message != "exit code 3 (Error): BackoffLimitExceeded" {
		t.Errorf("failed job: exit code %v, %q; want 3 in both", w.ExitCode, w.Message)
	}
	if h := history(t, st, ids["again"]); !cmp.Equal(h, []string{"Created  u-old", "ContainerDeleted  u-old"}) {
		t.Errorf("recreated object: history %q, want the recorded UID deleted", h)
	}
	if len(c.list()) != 7 {
		t.Errorf("OnEvent got %d events, want 7: %q", len(c.list()), c.list())
	}
	for _, a := range client.Actions() {
		if a.GetVerb() != "list" {
			t.Errorf("request %s %s: want lists only", a.GetVerb(), a.GetResource().Resource)
		}
	}
	// pods, deployments, jobs (labelled) + jobs in "ns" and "other"
	// (confirming the absent ones) = 5, for 9 IDs; no ReplicaSets, as no
	// pod streamed is a ReplicaSet's.
	if d := cmp.Diff(map[string]int{"list pods": 2, "list deployments": 1, "list jobs": 4}, count(client)); d != "" {
		t.Errorf("requests (-want +got):\n%s", d)
	}
}

// TestReconcileOtherCluster: records made on another cluster than the
// client's are named to OnSkip and cost no request at all: that cluster's
// objects say nothing about them.
func TestReconcileOtherCluster(t *testing.T) {
	st := newStore(t)
	id := jobID("ns", "elsewhere")
	record(t, st, id, "u1", store.StateRunning)
	if err := st.SetCluster(t.Context(), id.String(), "https://other"); err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset()
	var skipped []string
	sum, err := Reconcile(t.Context(), client, st, ReconcileOptions{Owner: owner("a"), Runtimes: []string{runtimeid.RuntimeK8s},
		Cluster: "https://here", OnSkip: func(id, rec string) { skipped = append(skipped, id+" "+rec) }})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{id.String() + " https://other"}, skipped); d != "" {
		t.Errorf("skipped (-want +got):\n%s", d)
	}
	if sum != (Summary{}) || len(client.Actions()) != 0 || state(t, st, id) != store.StateRunning {
		t.Errorf("summary %+v, %d requests, state %s; want nothing done", sum, len(client.Actions()), state(t, st, id))
	}
}

// TestReconcileRetriesTransientErrors: a stream that meets a 500 and a 429
// is read again; the pass records what the objects say, once.
func TestReconcileRetriesTransientErrors(t *testing.T) {
	st := newStore(t)
	id := jobID("ns", "task")
	record(t, st, id, "u1", store.StateCreated)
	client := fake.NewClientset(job("ns", "task", "u1", batchv1.JobStatus{Active: 1, Ready: ptr.To(int32(1))}))
	calls := 0
	client.PrependReactor("list", "jobs", func(k8stesting.Action) (bool, kruntime.Object, error) {
		calls++
		switch calls {
		case 1:
			return true, nil, apierrors.NewInternalError(errors.New("etcd leader changed"))
		case 2:
			return true, nil, apierrors.NewTooManyRequests("slow down", 0)
		}
		return false, nil, nil
	})
	sum, err := Reconcile(t.Context(), client, st, ReconcileOptions{Owner: owner("a"), Runtimes: []string{runtimeid.RuntimeK8s}})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(Summary{Reattached: 1, Changed: 1}, sum); d != "" {
		t.Errorf("summary (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"Created  u1", "ContainerStarted  u1"}, history(t, st, id)); d != "" {
		t.Errorf("history (-want +got):\n%s", d)
	}
	if calls != 3 {
		t.Errorf("%d job lists, want 3", calls)
	}
}

// TestReconcileRetriedStreamCountsOnce: a stream cut after some objects is
// read again and passes them again; they count once toward "every record
// was streamed", so a record whose object is gone is still found absent
// and recorded deleted.
func TestReconcileRetriedStreamCountsOnce(t *testing.T) {
	st := newStore(t)
	seen, gone := jobID("ns", "task"), jobID("ns", "gone")
	record(t, st, seen, "u1", store.StateCreated)
	record(t, st, gone, "u2", store.StateCreated)
	task := job("ns", "task", "u1", batchv1.JobStatus{Active: 1, Ready: ptr.To(int32(1))})
	client := fake.NewClientset(task)
	calls := 0
	client.PrependReactor("list", "jobs", func(a k8stesting.Action) (bool, kruntime.Object, error) {
		if a.(k8stesting.ListAction).GetListRestrictions().Labels.Empty() {
			return false, nil, nil // the absence check
		}
		calls++
		switch calls {
		case 1: // a first page, then the stream is cut
			return true, &batchv1.JobList{ListMeta: metav1.ListMeta{Continue: "next"}, Items: []batchv1.Job{*task}}, nil
		case 2:
			return true, nil, apierrors.NewInternalError(errors.New("etcd leader changed"))
		}
		return false, nil, nil
	})
	if _, err := Reconcile(t.Context(), client, st, ReconcileOptions{Owner: owner("a"), Runtimes: []string{runtimeid.RuntimeK8s}}); err != nil {
		t.Fatal(err)
	}
	if calls != 3 {
		t.Errorf("%d labelled job lists, want 3 (the stream read again)", calls)
	}
	if s := state(t, st, seen); s != store.StateRunning {
		t.Errorf("streamed job: %s, want running", s)
	}
	if s := state(t, st, gone); s != store.StateDeleted {
		t.Errorf("job whose object is gone: %s, want deleted", s)
	}
}

// TestReconcileStreamErrorStopsThePass: a kind whose stream fails for good
// ends the pass with its error while the other kind streams at the same
// time; nothing waits forever for the writer or for the other stream.
func TestReconcileStreamErrorStopsThePass(t *testing.T) {
	st := newStore(t)
	record(t, st, jobID("ns", "task"), "u1", store.StateCreated)
	record(t, st, deployID("ns", "web"), "u2", store.StateCreated)
	client := fake.NewClientset(job("ns", "task", "u1", batchv1.JobStatus{Active: 1}),
		deployment("ns", "web", "u2", 1, appsv1.DeploymentStatus{Replicas: 1, ReadyReplicas: 1}))
	client.PrependReactor("list", "jobs", func(k8stesting.Action) (bool, kruntime.Object, error) {
		return true, nil, apierrors.NewForbidden(batchv1.Resource("jobs"), "", errors.New("no"))
	})
	_, err := Reconcile(t.Context(), client, st, ReconcileOptions{Owner: owner("a"), Runtimes: []string{runtimeid.RuntimeK8s}})
	if err == nil || !strings.Contains(err.Error(), `list jobs in namespace "ns" is forbidden`) {
		t.Fatalf("Reconcile: %v, want the jobs' list forbidden", err)
	}
	if s := state(t, st, jobID("ns", "task")); s != store.StateCreated {
		t.Errorf("job: %s, want created (not read)", s)
	}
}

// TestKeySet: a key added several times (a stream read again) counts once,
// with its highest count; counts above countMask are capped (fewer, never
// more); has finds what was added and nothing else.
func TestKeySet(t *testing.T) {
	s := &keySet{}
	a, b, c := keyHash("job", "ns", "a"), keyHash("job", "ns", "b"), keyHash("job", "ns", "c")
	s.add(a, 1)
	s.add(b, 2)
	s.add(a, 0) // read again: its record changed since the pass began
	s.add(b, 2)
	s.add(c, 100)
	if got, want := s.seal(), 1+2+countMask; got != want {
		t.Errorf("seal: %d, want %d", got, want)
	}
	if len(s.keys) != 3 {
		t.Errorf("%d entries, want 3", len(s.keys))
	}
	for _, h := range []uint64{a, b, c} {
		if !s.has(h) {
			t.Errorf("has(%x) = false", h)
		}
	}
	if s.has(keyHash("job", "ns", "d")) || s.has(keyHash("deployment", "ns", "a")) {
		t.Error("has a key never added")
	}
	var none *keySet
	if none.has(a) || none.seal() != 0 {
		t.Error("a nil set is not empty")
	}
}

// TestKeySetBytesPerKey: the set of the objects streamed costs 8 bytes an
// object (at most 12 here, for what other goroutines allocate meanwhile), from the first add to the lookups (a Go map of the same hashes,
// as before, took 22 bytes an object at 100,000, 2.2 MiB of recover's heap).
func TestKeySetBytesPerKey(t *testing.T) {
	const n = 100000
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc
	s := &keySet{keys: make([]uint64, 0, n)} // as run makes it: sized by the live records
	for i := range n {
		s.add(keyHash("job", "ns", strconv.Itoa(i)), 1)
	}
	if got := s.seal(); got != n {
		t.Fatalf("seal: %d, want %d", got, n)
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	if per := float64(ms.HeapAlloc-min(before, ms.HeapAlloc)) / n; per > 12 {
		t.Errorf("%.1f bytes a key, want at most 12", per)
	}
	if !s.has(keyHash("job", "ns", "99999")) {
		t.Error("a key added is not found")
	}
	runtime.KeepAlive(s)
}

// TestKeyHashIsFNV1a: keyHash, computed in place, is hash/fnv's 64-bit
// FNV-1a of kind, ns and name joined by zero bytes.
func TestKeyHashIsFNV1a(t *testing.T) {
	for _, k := range [][3]string{{"", "", ""}, {"job", "ns", "task-1"}, {"deployment", "gen-042", "svc-000042"}, {"a", "", "\x00é"}} {
		h := fnv.New64a()
		h.Write([]byte(k[0] + "\x00" + k[1] + "\x00" + k[2]))
		if got, want := keyHash(k[0], k[1], k[2]), h.Sum64(); got != want {
			t.Errorf("keyHash%q = %x, want %x", k, got, want)
		}
	}
	if allocs := testing.AllocsPerRun(100, func() { _ = keyHash("deployment", "gen-042", "svc-000042") }); allocs != 0 {
		t.Errorf("keyHash allocates %.0f times, want 0", allocs)
	}
}

// TestObserveStreamedDoesNotCopy: a streamed Deployment or Job maps as
// runtime.Observe maps it, without the slimmed copy runtime.Observe makes
// to find its kind (a copy per object of a pass).
func TestObserveStreamedDoesNotCopy(t *testing.T) {
	objs := []any{
		deployment("ns", "web", "u1", 1, appsv1.DeploymentStatus{Replicas: 1, ReadyReplicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1}),
		deployment("ns", "idle", "u2", 0, appsv1.DeploymentStatus{}),
		job("ns", "task", "u3", batchv1.JobStatus{Active: 1}),
		job("ns", "done", "u4", batchv1.JobStatus{Succeeded: 1, Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}),
	}
	for _, o := range objs {
		want, wantOK := observe(o)
		got, ok := observeStreamed(o)
		if ok != wantOK || !cmp.Equal(got, want) {
			t.Errorf("observeStreamed(%T) = %+v, %v; want %+v, %v", o, got, ok, want, wantOK)
		}
		m := o.(metav1.Object)
		m.SetLabels(map[string]string{WorkloadLabel: "x"})
		m.SetAnnotations(map[string]string{"gobrave.dev/spec": "{}"})
		if allocs := testing.AllocsPerRun(50, func() { _, _ = observeStreamed(o) }); allocs > 1 {
			t.Errorf("observeStreamed(%s) allocates %.0f times, want at most 1", m.GetName(), allocs)
		}
	}
}

// TestReconcileReplicaSets: a Deployment's pods reach its record through
// their ReplicaSet; with no pod of a ReplicaSet streamed, no ReplicaSet is
// read at all (most Deployments of a large cluster are scaled to zero, each
// with a ReplicaSet as large as itself).
func TestReconcileReplicaSets(t *testing.T) {
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "ns", UID: "rs1", Labels: map[string]string{WorkloadLabel: "web"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "Deployment", Name: "web", UID: "d1", Controller: ptr.To(true)}}}}
	crash := corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{RestartCount: 3,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 7, Reason: "Error"}}}}}
	pod := ownedPod("ns", "web-1-abc", "web", metav1.OwnerReference{Kind: "ReplicaSet", Name: "web-1", UID: "rs1"}, 0, crash)
	jobPod := ownedPod("ns", "task-1", "task", metav1.OwnerReference{Kind: "Job", Name: "task", UID: "j1"}, 0, corev1.PodStatus{Phase: corev1.PodRunning})
	dep := deployment("ns", "web", "d1", 1, appsv1.DeploymentStatus{Replicas: 1})
	web := deployID("ns", "web")

	for _, tc := range []struct {
		name string
		pod  kruntime.Object // the pod streamed
	}{
		{"a pod of the ReplicaSet", pod},
		{"only a job's pod", jobPod},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newStore(t)
			record(t, st, web, "d1", store.StateRunning)
			client := fake.NewClientset(dep, rs, tc.pod)
			if _, err := Reconcile(t.Context(), client, st, ReconcileOptions{Owner: owner("a"), Runtimes: []string{runtimeid.RuntimeK8s}}); err != nil {
				t.Fatal(err)
			}
			w, err := st.Get(t.Context(), web.String())
			if err != nil {
				t.Fatal(err)
			}
			reads := count(client)["list replicasets"]
			if tc.pod == pod {
				if w.Reason != "CrashLoopBackOff" || w.ExitCode == nil || *w.ExitCode != 7 {
					t.Errorf("record: reason %q, exit code %v; want the pod's CrashLoopBackOff and 7 through its ReplicaSet", w.Reason, w.ExitCode)
				}
				if reads == 0 {
					t.Error("no ReplicaSet read: the pod's note cannot reach its Deployment")
				}
				return
			}
			if w.Reason != "" {
				t.Errorf("record: reason %q with no pod of the Deployment", w.Reason)
			}
			if reads != 0 {
				t.Errorf("%d ReplicaSet lists with no pod of a ReplicaSet, want none", reads)
			}
		})
	}
}

// TestReconcileGivenScopes: the scopes a caller read (ReconcileOptions.Scopes)
// are not read again (a scan of every record): only their kinds are
// streamed, and the pass begins when they were read, so a record made after
// that is left alone even when its object is not streamed.
func TestReconcileGivenScopes(t *testing.T) {
	st := newStore(t)
	task, web, late := jobID("ns", "task"), deployID("ns", "web"), jobID("ns", "late")
	record(t, st, task, "u-task", store.StateCreated)
	record(t, st, web, "u-web", store.StateCreated)
	client := fake.NewClientset(job("ns", "task", "u-task", batchv1.JobStatus{Active: 1, Ready: ptr.To(int32(1))}),
		deployment("ns", "web", "u-web", 1, appsv1.DeploymentStatus{Replicas: 1, ReadyReplicas: 1}))
	at := time.Now()
	scopes, err := st.LiveScopes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var jobs []store.Scope
	for _, sc := range scopes {
		if sc.Kind == runtimeid.KindJob {
			jobs = append(jobs, sc)
		}
	}
	time.Sleep(2 * time.Millisecond) // the store's clock: late is made after at
	record(t, st, late, "u-late", store.StateCreated)
	_, err = Reconcile(t.Context(), client, st, ReconcileOptions{Owner: owner("a"), Runtimes: []string{runtimeid.RuntimeK8s},
		Scopes: jobs, ScopesAt: at})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]store.State{"task": state(t, st, task), "web": state(t, st, web), "late": state(t, st, late)}
	want := map[string]store.State{"task": store.StateRunning, "web": store.StateCreated, "late": store.StateCreated}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("states (-want +got):\n%s", d)
	}
	if n := count(client)["list deployments"]; n != 0 {
		t.Errorf("%d lists of deployments, want none: the scopes given name jobs only", n)
	}
}
