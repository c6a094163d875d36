package runtime

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// Reasons read from a workload's newest pod: the kubelet's waiting reasons
// of a container, and the scheduler's reason of a pod no node fits.
const (
	ReasonErrImagePull               = "ErrImagePull"
	ReasonImagePullBackOff           = "ImagePullBackOff"
	ReasonInvalidImageName           = "InvalidImageName"
	ReasonCreateContainerConfigError = "CreateContainerConfigError"
	ReasonCreateContainerError       = "CreateContainerError"
	ReasonCrashLoopBackOff           = "CrashLoopBackOff"
	ReasonUnschedulable              = corev1.PodReasonUnschedulable
	// ReasonCompleted: a job whose pods all succeeded (exit code 0).
	ReasonCompleted = "Completed"
	// ReasonError: a job that failed without a reason from its controller.
	ReasonError = "Error"
	// ReasonSuspended: a job whose spec.suspend holds its pods off (gobrave's
	// pause, or Kueue and kubectl patch from outside).
	ReasonSuspended = "Suspended"
)

// fatalReasons are the waiting reasons that end a wait at once: the
// kubelet keeps retrying, but nothing changes without the user (a new image,
// a fixed spec, a container that stops crashing).
var fatalReasons = map[string]bool{
	ReasonErrImagePull:               true,
	ReasonImagePullBackOff:           true,
	ReasonInvalidImageName:           true,
	ReasonCreateContainerConfigError: true,
	ReasonCreateContainerError:       true,
	ReasonCrashLoopBackOff:           true,
}

// Fatal reports whether a recorded reason ends a wait: one of the waiting
// reasons above. Unschedulable is not fatal (the cluster may grow).
func Fatal(reason string) bool { return fatalReasons[reason] }

// Termination is how a container last ended.
type Termination struct {
	ExitCode   int32     `json:"exitCode"`
	Reason     string    `json:"reason"`
	StartedAt  time.Time `json:"startedAt"`
	FinishedAt time.Time `json:"finishedAt"`
}

// PodStatus is what the newest pod of a workload says about why it does not
// run: a container waiting with one of the reasons above (the first such
// container, init containers first), else the scheduler's Unschedulable.
// Restarts and LastTermination are read whatever the reason.
type PodStatus struct {
	// Reason is "" when the pod shows nothing wrong.
	Reason  string
	Message string
	// Fatal: Reason is one of the waiting reasons that end a wait.
	Fatal bool
	// Restarts sums the containers' restart counts.
	Restarts int32
	// LastTermination is the last termination of the waiting container (of
	// the first container that has one when none waits); nil when none.
	LastTermination *Termination
}

// PodStatusOf maps a pod (full or slimmed by SlimPod) to its status. Pure.
func PodStatusOf(p *corev1.Pod) PodStatus {
	var s PodStatus
	if p == nil {
		return s
	}
	statuses := make([]corev1.ContainerStatus, 0, len(p.Status.InitContainerStatuses)+len(p.Status.ContainerStatuses))
	statuses = append(statuses, p.Status.InitContainerStatuses...)
	statuses = append(statuses, p.Status.ContainerStatuses...)
	for _, cs := range statuses {
		s.Restarts += cs.RestartCount
		last := termination(cs.LastTerminationState.Terminated)
		if w := cs.State.Waiting; w != nil && fatalReasons[w.Reason] && s.Reason == "" {
			s.Reason, s.Message, s.Fatal = w.Reason, w.Message, true
			if last != nil {
				s.LastTermination = last
			}
		}
		if s.LastTermination == nil && last != nil {
			s.LastTermination = last
		}
	}
	if s.Reason != "" {
		return s
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			s.Reason, s.Message = ReasonUnschedulable, c.Message
		}
	}
	return s
}

func termination(t *corev1.ContainerStateTerminated) *Termination {
	if t == nil {
		return nil
	}
	return &Termination{ExitCode: t.ExitCode, Reason: t.Reason, StartedAt: t.StartedAt.Time, FinishedAt: t.FinishedAt.Time}
}

// Observation is the ContainerWaiting observation of a pod status for the
// workload object uid; false when the pod shows nothing wrong. A crash
// loop carries the last exit code, and its message says how the container
// last ended.
func (s PodStatus) Observation(uid string) (Observation, bool) {
	if s.Reason == "" {
		return Observation{}, false
	}
	o := Observation{Type: store.ContainerWaiting, Message: s.Message, UID: uid, Result: store.Result{Reason: s.Reason}}
	if s.Reason == ReasonCrashLoopBackOff && s.LastTermination != nil {
		code := s.LastTermination.ExitCode
		o.ExitCode = &code
		detail := fmt.Sprintf("last exit code %d", code)
		if s.LastTermination.Reason != "" {
			detail += " (" + s.LastTermination.Reason + ")"
		}
		if o.Message == "" {
			o.Message = detail
		} else {
			o.Message += "; " + detail
		}
	}
	return o, true
}

// NewestOwned returns the newest of pods whose controller is one of owners
// (nil when none).
func NewestOwned(pods []*corev1.Pod, owners map[types.UID]bool) *corev1.Pod {
	var newest *corev1.Pod
	for _, p := range pods {
		if ref := metav1.GetControllerOf(p); ref == nil || !owners[ref.UID] {
			continue
		}
		if newest == nil || newer(p, newest) {
			newest = p
		}
	}
	return newest
}

// slimOwnedMeta is slimMeta plus what ownership and age need: the
// controller owner reference and the creation time.
func slimOwnedMeta(m *metav1.ObjectMeta) metav1.ObjectMeta {
	out := slimMeta(m)
	out.CreationTimestamp = m.CreationTimestamp
	for _, r := range m.OwnerReferences {
		if r.Controller != nil && *r.Controller {
			out.OwnerReferences = []metav1.OwnerReference{{Kind: r.Kind, Name: r.Name, UID: r.UID, Controller: r.Controller}}
			break
		}
	}
	return out
}

// SlimPod keeps what PodStatusOf and the ownership of pods read: the
// controller reference, the creation time, the phase, the PodScheduled
// condition, and the containers' restart counts, waiting reasons and
// messages, and terminations (exit code, reason, times, and the message of
// a failed one: a job's failure is recorded with what its container said,
// at most the kubelet's 4 KiB). The monitor caches one per pod of every
// workload.
func SlimPod(o *corev1.Pod) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: slimOwnedMeta(&o.ObjectMeta),
		Status:     corev1.PodStatus{Phase: o.Status.Phase},
	}
	for _, c := range o.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			p.Status.Conditions = []corev1.PodCondition{{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message}}
		}
	}
	p.Status.InitContainerStatuses = slimStatuses(o.Status.InitContainerStatuses)
	p.Status.ContainerStatuses = slimStatuses(o.Status.ContainerStatuses)
	return p
}

func slimStatuses(in []corev1.ContainerStatus) []corev1.ContainerStatus {
	if len(in) == 0 {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(in))
	for i, cs := range in {
		out[i] = corev1.ContainerStatus{
			RestartCount:         cs.RestartCount,
			State:                slimState(cs.State),
			LastTerminationState: slimState(cs.LastTerminationState),
		}
	}
	return out
}

func slimState(s corev1.ContainerState) corev1.ContainerState {
	var out corev1.ContainerState
	if w := s.Waiting; w != nil {
		out.Waiting = &corev1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}
	}
	if t := s.Terminated; t != nil {
		out.Terminated = &corev1.ContainerStateTerminated{ExitCode: t.ExitCode, Reason: t.Reason, StartedAt: t.StartedAt, FinishedAt: t.FinishedAt}
		if t.ExitCode != 0 {
			out.Terminated.Message = t.Message
		}
	}
	return out
}

// SlimReplicaSet keeps what the ownership of pods reads: its UID and its
// controller (the Deployment).
func SlimReplicaSet(o *appsv1.ReplicaSet) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{ObjectMeta: slimOwnedMeta(&o.ObjectMeta)}
}
