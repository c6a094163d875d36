package monitor

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// TestReconcileStreamsPodsAlongsideWorkloads: the pods' stream does not
// hold back the workloads' (their requests' first answers overlap): the
// pods' list here does not end before a job list has been asked for, which
// a pass that streamed the pods first never does. The writer still waits
// for the pods: the failed job gets its pod's exit code.
func TestReconcileStreamsPodsAlongsideWorkloads(t *testing.T) {
	st := newStore(t)
	failed := batchv1.JobStatus{Failed: 1, Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"}}}
	id := jobID("ns", "fail")
	record(t, st, id, "u-fail", store.StateCreated)
	pod := ownedPod("ns", "fail-1", "fail", metav1.OwnerReference{Kind: "Job", Name: "fail", UID: "u-fail"}, 0, corev1.PodStatus{Phase: corev1.PodFailed,
		ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}}}}})
	client := fake.NewClientset(job("ns", "fail", "u-fail", failed), pod)
	var jobsAsked atomic.Bool
	client.PrependReactor("list", "jobs", func(k8stesting.Action) (bool, kruntime.Object, error) {
		jobsAsked.Store(true)
		return false, nil, nil
	})
	// The fake holds its lock while a reactor runs: the pods' list cannot
	// wait in it for the jobs' list. It answers empty pages instead (a
	// paginated list goes on) until the jobs were asked for, then the pod.
	spins := 0
	client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, kruntime.Object, error) {
		if jobsAsked.Load() {
			return false, nil, nil
		}
		if spins++; spins > 100_000 {
			return true, nil, errors.New("the jobs were not asked for while the pods streamed")
		}
		runtime.Gosched()
		return true, &corev1.PodList{ListMeta: metav1.ListMeta{Continue: fmt.Sprint(spins)}}, nil
	})
	if _, err := Reconcile(t.Context(), client, st, ReconcileOptions{Owner: owner("a"), Runtimes: []string{runtimeid.RuntimeK8s}}); err != nil {
		t.Fatal(err)
	}
	w, err := st.Get(t.Context(), id.String())
	if err != nil {
		t.Fatal(err)
	}
	if w.State != store.StateFailed || w.ExitCode == nil || *w.ExitCode != 3 {
		t.Errorf("failed job: %s, exit code %v; want failed with the pod's 3", w.State, w.ExitCode)
	}
}

// TestReconcileFirstBatchesAreSmall: a stream's first batch is firstBatch
// objects, each next one twice the last up to batchSize, so that the writer
// starts on the first objects streamed.
func TestReconcileFirstBatchesAreSmall(t *testing.T) {
	st := newStore(t)
	const n = 2*batchSize + 100
	objs := make([]kruntime.Object, 0, n)
	for i := range n {
		name := fmt.Sprintf("task-%04d", i)
		objs = append(objs, job("ns", name, "u-"+name, batchv1.JobStatus{Active: 1, Ready: ptr.To(int32(1))}))
		record(t, st, jobID("ns", name), "u-"+name, store.StateCreated)
	}
	client := fake.NewClientset(objs...)
	var mu sync.Mutex
	var sizes []int
	flushedHook = func(_ string, n int) {
		mu.Lock()
		defer mu.Unlock()
		sizes = append(sizes, n)
	}
	t.Cleanup(func() { flushedHook = nil })
	sum, err := Reconcile(t.Context(), client, st, ReconcileOptions{Owner: owner("a"), Runtimes: []string{runtimeid.RuntimeK8s}})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Changed != n {
		t.Errorf("changed %d, want %d", sum.Changed, n)
	}
	// 32+64+128 = 224, then 256, then the rest (612-480 = 132).
	want := []int{firstBatch, 2 * firstBatch, 4 * firstBatch, batchSize, n - 7*firstBatch - batchSize}
	if d := cmp.Diff(want, sizes); d != "" {
		t.Errorf("batch sizes (-want +got):\n%s", d)
	}
}

// TestWatchListIdleExcludesTheCallback: the idle time bounds the server's
// silence, not the time fn takes (a pass's writer holding its streams back
// while the pods stream): a callback slower than idle does not end the
// stream.
func TestWatchListIdleExcludesTheCallback(t *testing.T) {
	const idle = 50 * time.Millisecond
	fw := watch.NewFakeWithChanSize(3, false)
	fw.Add(job("ns", "a", "ua", batchv1.JobStatus{}))
	fw.Add(job("ns", "b", "ub", batchv1.JobStatus{}))
	fw.Action(watch.Bookmark, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "7", Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}})
	var wctx context.Context
	l := lister{watch: func(ctx context.Context, _ metav1.ListOptions) (watch.Interface, error) { wctx = ctx; return fw, nil }}
	n := 0
	rv, got, err := watchList(t.Context(), l, WorkloadLabel, idle, func(any) error {
		n++
		if n == 1 {
			time.Sleep(4 * idle) // held back, as by a writer that waits
			if err := context.Cause(wctx); err != nil {
				return fmt.Errorf("the stream was ended while fn ran: %w", err)
			}
		}
		return nil
	})
	if err != nil || got != 2 || rv != "7" {
		t.Fatalf("watchList: rv %q, %d objects, %v; want 7, 2, no error", rv, got, err)
	}
}

// TestReconcilePodStreamErrorStopsThePass: the pods' stream, which now
// runs alongside the workloads', still ends the pass with its error, and
// the writer records nothing without the pods' notes.
func TestReconcilePodStreamErrorStopsThePass(t *testing.T) {
	st := newStore(t)
	id := jobID("ns", "task")
	record(t, st, id, "u1", store.StateCreated)
	client := fake.NewClientset(job("ns", "task", "u1", batchv1.JobStatus{Active: 1, Ready: ptr.To(int32(1))}))
	client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, kruntime.Object, error) {
		return true, nil, apierrors.NewBadRequest("no pods today")
	})
	_, err := Reconcile(t.Context(), client, st, ReconcileOptions{Owner: owner("a"), Runtimes: []string{runtimeid.RuntimeK8s}})
	if err == nil || !strings.Contains(err.Error(), "no pods today") {
		t.Fatalf("Reconcile: %v, want the pods' error", err)
	}
	if s := state(t, st, id); s != store.StateCreated {
		t.Errorf("job: %s, want created (nothing recorded without the pods)", s)
	}
}
