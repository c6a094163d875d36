package monitor

import (
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/gobrave/kubectl-gobrave/pkg/runtime"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

var backoffFailed = batchv1.JobStatus{Failed: 1, Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue,
	Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"}}}

func setPodStatus(t *testing.T, c *fake.Clientset, ns, name string, status corev1.PodStatus) {
	t.Helper()
	p, err := c.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status = status
	if _, err := c.CoreV1().Pods(ns).UpdateStatus(t.Context(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func exited(code int32) corev1.PodStatus {
	return corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Error"}}}}}
}

// failingJob is a running job "task" (uid u1) with its running pod, watched
// by a Monitor (without Follow: Run ends when the record is terminal).
func failingJob(t *testing.T) (*fake.Clientset, *store.Store, <-chan result, func() []string) {
	st := newStore(t)
	id := jobID("ns", "task")
	record(t, st, id, "u1", store.StateRunning)
	client := fake.NewClientset(
		job("ns", "task", "u1", batchv1.JobStatus{Active: 1, Ready: ptr.To(int32(1))}),
		ownedPod("ns", "task-abc", "task", metav1.OwnerReference{Kind: "Job", Name: "task", UID: "u1"}, 0,
			corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{
				Running: &corev1.ContainerStateRunning{}}}}}),
	)
	isWatched := watched(client)
	m := New(client, st, Options{Owner: owner("a")})
	m.Add(id)
	done := start(t.Context(), m)
	eventually(t, "the watches", func() bool { return isWatched("jobs") && isWatched("pods") })
	eventually(t, "the snapshot", func() bool { return snapshotted(m, id) })
	return client, st, done, func() []string { return history(t, st, id) }
}

const failedMsg = "BackoffLimitExceeded: Job has reached the specified backoff limit u1"

// TestFailureWaitsForItsPod: a job's Failed condition seen before the pod
// watch has brought its failed pod is held back, and recorded with the
// container's exit code when the pod comes; what is observed of the job
// meanwhile is recorded after it, in order.
func TestFailureWaitsForItsPod(t *testing.T) {
	t.Run("pod comes", func(t *testing.T) {
		client, _, done, hist := failingJob(t)
		updateJobStatus(t, client, "ns", "task", backoffFailed)
		// Not recorded while the pod cache shows the pod running (recorded
		// within milliseconds without the hold).
		time.Sleep(300 * time.Millisecond)
		if h := hist(); slices.ContainsFunc(h, func(s string) bool { return strings.HasPrefix(s, "ContainerFailed") }) {
			t.Fatalf("the failure was recorded before its pod: %q", h)
		}
		setPodStatus(t, client, "ns", "task-abc", exited(3))
		if r := await(t, done); r.err != nil {
			t.Fatal(r.err)
		}
		h := hist()
		if want := "ContainerFailed exit code 3 (Error): " + failedMsg; h[len(h)-1] != want {
			t.Errorf("last event %q, want %q (history %q)", h[len(h)-1], want, h)
		}
	})
	t.Run("later observations wait behind it", func(t *testing.T) {
		client, _, done, hist := failingJob(t)
		updateJobStatus(t, client, "ns", "task", backoffFailed)
		time.Sleep(100 * time.Millisecond)
		if err := client.BatchV1().Jobs("ns").Delete(t.Context(), "task", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		setPodStatus(t, client, "ns", "task-abc", exited(3))
		if r := await(t, done); r.err != nil {
			t.Fatal(r.err)
		}
		h := hist()
		failed := slices.Index(h, "ContainerFailed exit code 3 (Error): "+failedMsg)
		deleted := slices.IndexFunc(h, func(s string) bool { return strings.HasPrefix(s, "ContainerDeleted") })
		if failed < 0 || deleted >= 0 && deleted < failed {
			t.Errorf("history %q: want the failure with its exit code, before any deletion", h)
		}
	})
	t.Run("pod never comes", func(t *testing.T) {
		defer func(d time.Duration) { failHoldFor = d }(failHoldFor)
		failHoldFor = 200 * time.Millisecond
		client, _, done, hist := failingJob(t)
		updateJobStatus(t, client, "ns", "task", backoffFailed)
		if r := await(t, done); r.err != nil {
			t.Fatal(r.err)
		}
		if h := hist(); h[len(h)-1] != "ContainerFailed "+failedMsg {
			t.Errorf("history %q: want the failure without an exit code once the hold ends", h)
		}
	})
}

func TestIsJobFailure(t *testing.T) {
	obs := func(reason string) runtime.Observation {
		return runtime.Observation{Type: store.ContainerFailed, Message: "m", UID: "u1", Result: store.Result{Reason: reason}}
	}
	code := int32(3)
	withCode := obs("BackoffLimitExceeded")
	withCode.ExitCode = &code
	tests := []struct {
		name string
		it   item
		want bool
	}{
		{"backoff limit", item{ids: []string{jobID("ns", "a").String()}, obs: obs("BackoffLimitExceeded")}, true},
		{"pod failure policy", item{ids: []string{jobID("ns", "a").String()}, obs: obs("PodFailurePolicy")}, true},
		{"deadline: the pods were deleted, not failed", item{ids: []string{jobID("ns", "a").String()}, obs: obs("DeadlineExceeded")}, false},
		{"exit code known", item{ids: []string{jobID("ns", "a").String()}, obs: withCode}, false},
		{"deployment", item{ids: []string{deployID("ns", "a").String()}, obs: obs("BackoffLimitExceeded")}, false},
		{"started", item{ids: []string{jobID("ns", "a").String()}, obs: runtime.Observation{Type: store.ContainerStarted, UID: "u1"}}, false},
	}
	for _, tt := range tests {
		if got := isJobFailure(tt.it); got != tt.want {
			t.Errorf("%s: isJobFailure = %v, want %v", tt.name, got, tt.want)
		}
	}
}
