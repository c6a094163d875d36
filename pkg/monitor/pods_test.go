package monitor

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

func ownedPod(ns, name, workload string, owner metav1.OwnerReference, age time.Duration, st corev1.PodStatus) *corev1.Pod {
	owner.Controller = ptr.To(true)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("pod-" + name),
			CreationTimestamp: metav1.NewTime(time.Now().Add(-age)),
			Labels:            map[string]string{WorkloadLabel: workload}, OwnerReferences: []metav1.OwnerReference{owner}},
		Status: st,
	}
}

func waitingStatus(reason, msg string) corev1.PodStatus {
	return corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}}
}

// TestPodReasons: the newest pod owned by the recorded object (a Job's, a
// Deployment's through its ReplicaSet) gives the record its waiting reason
// without moving its state; pods of other owners and older pods do not; a
// change of reason is recorded again, a repeat is not.
func TestPodReasons(t *testing.T) {
	st := newStore(t)
	task, web := jobID("ns", "task"), deployID("ns", "web")
	record(t, st, task, "j1", store.StateStarting)
	record(t, st, web, "d1", store.StateRunning)
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "ns", UID: "rs1",
		Labels:          map[string]string{WorkloadLabel: "web"},
		OwnerReferences: []metav1.OwnerReference{{Kind: "Deployment", Name: "web", UID: "d1", Controller: ptr.To(true)}}}}
	crash := corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{RestartCount: 3,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 7, Reason: "Error"}}}}}
	client := fake.NewClientset(
		job("ns", "task", "j1", batchv1.JobStatus{Active: 1, Ready: ptr.To(int32(0))}),
		deployment("ns", "web", "d1", 1, appsv1.DeploymentStatus{Replicas: 1}),
		rs,
		// The job's newest pod cannot pull; an older one could not be created.
		ownedPod("ns", "task-new", "task", metav1.OwnerReference{Kind: "Job", Name: "task", UID: "j1"}, 0, waitingStatus("ImagePullBackOff", `Back-off pulling image "ngnix:1.27"`)),
		ownedPod("ns", "task-old", "task", metav1.OwnerReference{Kind: "Job", Name: "task", UID: "j1"}, time.Hour, waitingStatus("CreateContainerConfigError", "old")),
		// A look-alike of the deployment's pods, newer, owned by no ReplicaSet of it.
		ownedPod("ns", "web-stranger", "web", metav1.OwnerReference{Kind: "ReplicaSet", Name: "x", UID: "rs-other"}, 0, waitingStatus("ErrImagePull", "stranger")),
		ownedPod("ns", "web-1-abc", "web", metav1.OwnerReference{Kind: "ReplicaSet", Name: "web-1", UID: "rs1"}, time.Minute, crash),
	)
	isWatched := watched(client)
	m := New(client, st, Options{Owner: owner("a"), Follow: true})
	m.Add(task, web)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := start(ctx, m)
	reason := func(id string) string {
		w, err := st.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		return w.Reason
	}
	eventually(t, "both reasons", func() bool {
		return reason(task.String()) == "ImagePullBackOff" && reason(web.String()) == "CrashLoopBackOff"
	})
	eventually(t, "the pod watch", func() bool { return isWatched("pods") })

	// The same reason again (a new back-off message) is not recorded; the
	// pod that now pulls its image is a new reason.
	p := ownedPod("ns", "task-new", "task", metav1.OwnerReference{Kind: "Job", Name: "task", UID: "j1"}, 0, waitingStatus("ImagePullBackOff", `Back-off pulling image "ngnix:1.27" again`))
	if _, err := client.CoreV1().Pods("ns").UpdateStatus(t.Context(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	p.Status = waitingStatus("ErrImagePull", "not found")
	if _, err := client.CoreV1().Pods("ns").UpdateStatus(t.Context(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new reason", func() bool { return reason(task.String()) == "ErrImagePull" })
	cancel()
	if r := await(t, done); r.err != nil {
		t.Fatal(r.err)
	}

	want := []string{"Created  j1", `ContainerWaiting Back-off pulling image "ngnix:1.27" j1`, "ContainerWaiting not found j1"}
	if diff := cmp.Diff(want, history(t, st, task)); diff != "" {
		t.Errorf("job history (-want +got):\n%s", diff)
	}
	w, err := st.Get(t.Context(), web.String())
	if err != nil {
		t.Fatal(err)
	}
	if w.State != store.StateRunning || w.ExitCode == nil || *w.ExitCode != 7 || w.Message != "back-off 40s; last exit code 7 (Error)" {
		t.Errorf("deployment record: %s, exit code %v, %q; want running, 7, the back-off with the last exit", w.State, w.ExitCode, w.Message)
	}
	if s := state(t, st, task); s != store.StateStarting {
		t.Errorf("job state %s, want starting: a waiting reason moves no state", s)
	}
}

// TestFailureExitCodeFromCache: a failed job's exit code comes from the pod
// cache when its pods are there: no pod list beyond the informer's.
func TestFailureExitCodeFromCache(t *testing.T) {
	st := newStore(t)
	id := jobID("ns", "task")
	record(t, st, id, "j1", store.StateRunning)
	failed := batchv1.JobStatus{Failed: 1, Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"}}}
	pod := ownedPod("ns", "task-1", "task", metav1.OwnerReference{Kind: "Job", Name: "task", UID: "j1"}, 0, corev1.PodStatus{Phase: corev1.PodFailed,
		ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 9, Reason: "Error"}}}}})
	client := fake.NewClientset(job("ns", "task", "j1", batchv1.JobStatus{Active: 1, Ready: ptr.To(int32(1))}), pod)
	isWatched := watched(client)
	m := New(client, st, Options{Owner: owner("a")})
	m.Add(id)
	done := start(t.Context(), m)
	// The job fails once the pods are cached, as on a cluster where the
	// pod failed first.
	eventually(t, "the watches", func() bool { return isWatched("pods") && isWatched("jobs") })
	updateJobStatus(t, client, "ns", "task", failed)
	if r := await(t, done); r.err != nil {
		t.Fatal(r.err)
	}
	w, err := st.Get(t.Context(), id.String())
	if err != nil {
		t.Fatal(err)
	}
	if w.State != store.StateFailed || w.ExitCode == nil || *w.ExitCode != 9 || w.Message != "exit code 9 (Error): BackoffLimitExceeded" {
		t.Errorf("record %s, exit code %v, %q; want failed, 9, the exit code in the message", w.State, w.ExitCode, w.Message)
	}
	if n := count(client)["list pods"]; n != 1 {
		t.Errorf("%d pod lists, want 1 (the informer's)", n)
	}
}
