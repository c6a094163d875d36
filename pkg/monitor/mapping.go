package monitor

import (
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// Observation is what the monitor saw of one Kubernetes object: an observed
// event type, its message and the UID of the object it is about. The store
// decides whether it changes the workload's state.
type Observation struct {
	Type    store.EventType
	Message string
	UID     string
}

// Deleted is the observation for an object that is gone (a delete event, a
// tombstone, a NotFound lookup, or an object of the same name with another UID).
func Deleted(uid types.UID) Observation {
	return Observation{Type: store.ContainerDeleted, UID: string(uid)}
}

// JobEvent maps the status of a Job to an observation; false means there is
// nothing to report yet.
//
// The Complete and Failed conditions, set by the job controller when the Job
// is finished, win over the counters. Without them the counters are read:
// a Job with an active pod is running (a failed pod being retried is not a
// failure yet), then Succeeded > 0 means exited 0, and Failed > 0 means failed
// unless spec.backoffLimit is known and not yet exceeded (the controller will
// create another pod). A Job being deleted reports nothing but its end.
func JobEvent(j *batchv1.Job) (Observation, bool) {
	if j == nil {
		return Observation{}, false
	}
	uid := string(j.UID)
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return Observation{Type: store.ContainerExited, Message: "0", UID: uid}, true
		case batchv1.JobFailed:
			msg := conditionMessage(c.Reason, c.Message)
			if msg == "" {
				msg = "failed count " + strconv.Itoa(int(j.Status.Failed))
			}
			return Observation{Type: store.ContainerFailed, Message: msg, UID: uid}, true
		}
	}
	st := j.Status
	// status.active counts Pending pods too: a pod that cannot be scheduled
	// is active but has not started. status.ready (set by every job
	// controller since Kubernetes 1.24) counts pods whose containers run;
	// only without it is active the best there is.
	running := st.Active > 0
	if st.Ready != nil {
		running = *st.Ready > 0
	}
	switch {
	case running:
		if j.DeletionTimestamp != nil {
			return Observation{}, false
		}
		return Observation{Type: store.ContainerStarted, UID: uid}, true
	case st.Succeeded > 0:
		return Observation{Type: store.ContainerExited, Message: "0", UID: uid}, true
	case st.Failed > 0 && (j.Spec.BackoffLimit == nil || st.Failed > *j.Spec.BackoffLimit):
		return Observation{Type: store.ContainerFailed, Message: fmt.Sprintf("%d failed pods", st.Failed), UID: uid}, true
	}
	return Observation{}, false
}

// DeploymentEvent maps the status of a Deployment to an observation; false
// means there is nothing to report yet.
//
// A status older than the spec (status.observedGeneration <
// metadata.generation) is stale and reports nothing. Scaled to zero with no
// replica left is exited 0, whatever conditions remain from before; then a
// ReplicaFailure=True or a Progressing=False/ProgressDeadlineExceeded
// condition is a failure; then a ready replica means started.
func DeploymentEvent(d *appsv1.Deployment) (Observation, bool) {
	if d == nil {
		return Observation{}, false
	}
	if d.Status.ObservedGeneration < d.Generation {
		return Observation{}, false
	}
	uid := string(d.UID)
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	if want == 0 && d.Status.Replicas == 0 {
		return Observation{Type: store.ContainerExited, Message: "0", UID: uid}, true
	}
	for _, c := range d.Status.Conditions {
		failed := (c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue) ||
			(c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded")
		if failed {
			msg := conditionMessage(c.Reason, c.Message)
			if msg == "" {
				msg = string(c.Type)
			}
			return Observation{Type: store.ContainerFailed, Message: msg, UID: uid}, true
		}
	}
	if want > 0 && d.Status.ReadyReplicas > 0 && d.DeletionTimestamp == nil {
		return Observation{Type: store.ContainerStarted, UID: uid}, true
	}
	return Observation{}, false
}

// conditionMessage joins a condition's reason and message as "reason: message".
func conditionMessage(reason, message string) string {
	switch {
	case reason == "":
		return message
	case message == "":
		return reason
	}
	return reason + ": " + message
}
