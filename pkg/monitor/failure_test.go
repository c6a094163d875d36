package monitor

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
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

// TestFailureExitCodesInBulk: jobs found failed at the snapshot get their
// exit code from the pod informer's cache, with no request per failed job;
// one whose pods are gone (cleaned with it) keeps the condition's message.
func TestFailureExitCodesInBulk(t *testing.T) {
	st := newStore(t)
	failed := batchv1.JobStatus{Failed: 1, Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue,
		Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"}}}
	var objs []runtime.Object
	var ids []runtimeid.ID
	for i := range 3 {
		name, uid := fmt.Sprintf("task-%d", i), fmt.Sprintf("u%d", i)
		id := jobID("ns", name)
		ids = append(ids, id)
		record(t, st, id, uid, store.StateRunning)
		objs = append(objs, job("ns", name, uid, failed))
		if i < 2 {
			objs = append(objs, ownedPod("ns", name+"-abc", name, metav1.OwnerReference{Kind: "Job", Name: name, UID: types.UID(uid)}, 0,
				corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{
					Terminated: &corev1.ContainerStateTerminated{ExitCode: int32(10 + i), Reason: "Error"}}}}}))
		}
	}
	client := fake.NewClientset(objs...)
	m := New(client, st, Options{Owner: owner("a"), Once: true})
	m.Add(ids...)
	if r := await(t, start(t.Context(), m)); r.err != nil {
		t.Fatal(r.err)
	}
	for i, id := range ids {
		want := fmt.Sprintf("ContainerFailed exit code %d (Error): BackoffLimitExceeded: Job has reached the specified backoff limit u%d", 10+i, i)
		if i == 2 {
			want = "ContainerFailed BackoffLimitExceeded: Job has reached the specified backoff limit u2"
		}
		if diff := cmp.Diff([]string{fmt.Sprintf("Created  u%d", i), want}, history(t, st, id)); diff != "" {
			t.Errorf("%s history (-want +got):\n%s", id, diff)
		}
	}
	// A pass (Once) may end before the pod informer has opened its watch
	// after its list: at most one watch each, never a request per job.
	got := count(client)
	for _, w := range []string{"watch jobs", "watch pods"} {
		if got[w] > 1 {
			t.Errorf("%d %s requests, want at most 1", got[w], w)
		}
		delete(got, w)
	}
	if diff := cmp.Diff(map[string]int{"list jobs": 1, "list pods": 1}, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}
