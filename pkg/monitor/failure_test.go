package monitor

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

func terminatedPod(code int32, reason, msg string, at time.Time) corev1.Pod {
	return corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, Message: msg, FinishedAt: metav1.NewTime(at)}},
	}}}}
}

func TestExitDetailOf(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name string
		pods []corev1.Pod
		want string
	}{
		{"no pods", nil, ""},
		{"running pod", []corev1.Pod{{}}, ""},
		{"exit 0 is not a failure detail", []corev1.Pod{terminatedPod(0, "Completed", "", now)}, ""},
		{"exit 42", []corev1.Pod{terminatedPod(42, "Error", "", now)}, "exit code 42 (Error)"},
		{"message kept", []corev1.Pod{terminatedPod(137, "OOMKilled", " out of memory ", now)}, "exit code 137 (OOMKilled) out of memory"},
		{"newest wins", []corev1.Pod{terminatedPod(1, "Error", "", now.Add(-time.Minute)), terminatedPod(3, "", "", now)}, "exit code 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := exitDetailOf(tt.pods); got != tt.want {
				t.Errorf("exitDetailOf() = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestExitDetailRetriesTransientErrors: the pod list behind a failure's exit code meets a 500 and
// a 429 first; the message still carries the exit code, and the failure is recorded once.
func TestExitDetailRetriesTransientErrors(t *testing.T) {
	st := newStore(t)
	id := jobID("ns", "task")
	record(t, st, id, "u1", store.StateRunning)
	pod := terminatedPod(3, "Error", "", time.Now())
	pod.ObjectMeta = metav1.ObjectMeta{Name: "task-abc", Namespace: "ns",
		Labels: map[string]string{"batch.kubernetes.io/controller-uid": "u1", WorkloadLabel: "task"}}
	failed := batchv1.JobStatus{Failed: 1, Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue,
		Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"}}}
	client := fake.NewClientset(job("ns", "task", "u1", failed), &pod)
	calls := 0
	client.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if !strings.Contains(a.(k8stesting.ListAction).GetListRestrictions().Labels.String(), "controller-uid") {
			return false, nil, nil // the pod informer's list: the pod has no owner, its cache cannot tell
		}
		calls++
		switch calls {
		case 1:
			return true, nil, apierrors.NewInternalError(errors.New("etcd leader changed"))
		case 2:
			return true, nil, apierrors.NewTooManyRequests("slow down", 0)
		}
		return false, nil, nil
	})
	m := New(client, st, Options{Owner: owner("a")})
	m.getBackoff = wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 5}
	m.Add(id)
	if r := await(t, start(t.Context(), m)); r.err != nil {
		t.Fatal(r.err)
	}
	want := []string{"Created  u1", "ContainerFailed exit code 3 (Error): BackoffLimitExceeded: Job has reached the specified backoff limit u1"}
	if diff := cmp.Diff(want, history(t, st, id)); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	w, err := st.Get(t.Context(), id.String())
	if err != nil {
		t.Fatal(err)
	}
	if w.ExitCode == nil || *w.ExitCode != 3 || w.Reason != "BackoffLimitExceeded" {
		t.Errorf("record exit code %v reason %q, want 3 and BackoffLimitExceeded", w.ExitCode, w.Reason)
	}
	if calls != 3 {
		t.Errorf("%d pod lists, want 3", calls)
	}
}
