package runtime

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

func waiting(reason, msg string) corev1.ContainerState {
	return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
}

func TestPodStatusOf(t *testing.T) {
	t0, t1 := metav1.NewTime(now.Add(-time.Minute)), now
	crashed := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error", Message: "boom", StartedAt: t0, FinishedAt: t1}}
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: t1}}
	unschedulable := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
		Message: "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."}
	tests := []struct {
		name     string
		status   corev1.PodStatus
		want     PodStatus
		wantObs  *Observation
		wantFail bool
	}{
		{name: "no status yet", status: corev1.PodStatus{Phase: corev1.PodPending}},
		{name: "running", status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{State: running}}}},
		{name: "creating is not a reason", status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{State: waiting("ContainerCreating", "")}}}},
		{name: "pull error", status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{State: waiting("ErrImagePull", `failed to pull image "ngnix:1.27"`)}}},
			want:    PodStatus{Reason: "ErrImagePull", Message: `failed to pull image "ngnix:1.27"`, Fatal: true},
			wantObs: &Observation{Type: store.ContainerWaiting, Message: `failed to pull image "ngnix:1.27"`, UID: "u1", Result: store.Result{Reason: "ErrImagePull"}}},
		{name: "pull back-off", status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{State: waiting("ImagePullBackOff", `Back-off pulling image "ngnix:1.27"`)}}},
			want:    PodStatus{Reason: "ImagePullBackOff", Message: `Back-off pulling image "ngnix:1.27"`, Fatal: true},
			wantObs: &Observation{Type: store.ContainerWaiting, Message: `Back-off pulling image "ngnix:1.27"`, UID: "u1", Result: store.Result{Reason: "ImagePullBackOff"}}},
		{name: "invalid image name", status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{State: waiting("InvalidImageName", `Failed to apply default image tag "A:b"`)}}},
			want: PodStatus{Reason: "InvalidImageName", Message: `Failed to apply default image tag "A:b"`, Fatal: true}},
		{name: "config error", status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{State: waiting("CreateContainerConfigError", `secret "db" not found`)}}},
			want: PodStatus{Reason: "CreateContainerConfigError", Message: `secret "db" not found`, Fatal: true}},
		{name: "create error", status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{State: waiting("CreateContainerError", "no command specified")}}},
			want: PodStatus{Reason: "CreateContainerError", Message: "no command specified", Fatal: true}},
		{name: "crash loop with its last termination", status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
			RestartCount: 4, State: waiting("CrashLoopBackOff", "back-off 40s restarting failed container=web pod=web-1"), LastTerminationState: crashed}}},
			want: PodStatus{Reason: "CrashLoopBackOff", Message: "back-off 40s restarting failed container=web pod=web-1", Fatal: true, Restarts: 4,
				LastTermination: &Termination{ExitCode: 3, Reason: "Error", StartedAt: t0.Time, FinishedAt: t1.Time}},
			wantObs: &Observation{Type: store.ContainerWaiting, Message: "back-off 40s restarting failed container=web pod=web-1; last exit code 3 (Error)", UID: "u1",
				Result: store.Result{Reason: "CrashLoopBackOff", ExitCode: ptr(int32(3))}}},
		{name: "restarted and running again: no reason, the last termination stays", status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			RestartCount: 1, State: running, LastTerminationState: crashed}}},
			want: PodStatus{Restarts: 1, LastTermination: &Termination{ExitCode: 3, Reason: "Error", StartedAt: t0.Time, FinishedAt: t1.Time}}},
		{name: "init container first", status: corev1.PodStatus{
			InitContainerStatuses: []corev1.ContainerStatus{{State: waiting("ImagePullBackOff", "init")}},
			ContainerStatuses:     []corev1.ContainerStatus{{State: waiting("PodInitializing", "")}}},
			want: PodStatus{Reason: "ImagePullBackOff", Message: "init", Fatal: true}},
		{name: "unschedulable, with the scheduler's message", status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{unschedulable}},
			want:    PodStatus{Reason: "Unschedulable", Message: unschedulable.Message},
			wantObs: &Observation{Type: store.ContainerWaiting, Message: unschedulable.Message, UID: "u1", Result: store.Result{Reason: "Unschedulable"}}},
		{name: "scheduled", status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}}},
		{name: "not scheduled for another reason", status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "SchedulingGated"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "ns", UID: "p1",
				Labels: map[string]string{LabelWorkload: "web", "pod-template-hash": "1"}}, Status: tt.status}
			// The informers' transform keeps everything the mapping reads.
			for _, pod := range []*corev1.Pod{p, SlimPod(p)} {
				got := PodStatusOf(pod)
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("status (-want +got):\n%s", diff)
				}
				if Fatal(got.Reason) != tt.want.Fatal {
					t.Errorf("Fatal(%q) = %v, want %v", got.Reason, !tt.want.Fatal, tt.want.Fatal)
				}
				obs, ok := got.Observation("u1")
				if ok != (tt.want.Reason != "") {
					t.Errorf("observation %v, want one: %v", ok, tt.want.Reason != "")
				}
				if tt.wantObs != nil {
					type fields Observation
					if diff := cmp.Diff(fields(*tt.wantObs), fields(obs)); diff != "" {
						t.Errorf("observation (-want +got):\n%s", diff)
					}
				}
			}
		})
	}
	if got := PodStatusOf(nil); got.Reason != "" {
		t.Errorf("PodStatusOf(nil) = %+v", got)
	}
}

func TestNewestOwned(t *testing.T) {
	yes := true
	pod := func(name string, age time.Duration, owner types.UID) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(now.Add(-age))}}
		if owner != "" {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "rs", UID: owner, Controller: &yes}}
		}
		return SlimPod(p)
	}
	pods := []*corev1.Pod{pod("old", time.Hour, "rs1"), pod("new", time.Minute, "rs2"), pod("newest-stranger", 0, "other"), pod("orphan", 0, "")}
	if got := NewestOwned(pods, map[types.UID]bool{"rs1": true, "rs2": true}); got == nil || got.Name != "new" {
		t.Errorf("NewestOwned = %v, want new", got)
	}
	if got := NewestOwned(pods, map[types.UID]bool{"rs9": true}); got != nil {
		t.Errorf("NewestOwned of no pod = %s", got.Name)
	}
}

// TestSlimPodKeepsFailureMessages: the cache keeps a failed container's
// termination message (a job's failure is recorded with it) and drops a
// successful one's.
func TestSlimPodKeepsFailureMessages(t *testing.T) {
	p := &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
		{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error", Message: "disk full"}}},
		{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", Message: "all good"}}},
	}}}
	s := SlimPod(p)
	if got := s.Status.ContainerStatuses[0].State.Terminated.Message; got != "disk full" {
		t.Errorf("failed termination message %q, want kept", got)
	}
	if got := s.Status.ContainerStatuses[1].State.Terminated.Message; got != "" {
		t.Errorf("successful termination message %q, want dropped", got)
	}
}
