package monitor

import (
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// WorkloadLabel selects the objects gobrave manages; the informers list and
// watch only those.
const WorkloadLabel = "gobrave-workload"

// slim is the informers' transform: it keeps only what the mapping and the
// subscriptions read (name, namespace, uid, generation, resourceVersion,
// deletionTimestamp, the gobrave-workload label, spec.replicas,
// spec.backoffLimit, the status counters and the conditions' type, status,
// reason and message) so that thousands of cached workloads stay small.
// Objects of other types (tombstones) pass unchanged.
func slim(obj any) (any, error) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		d := &appsv1.Deployment{
			ObjectMeta: slimMeta(&o.ObjectMeta),
			Spec:       appsv1.DeploymentSpec{Replicas: o.Spec.Replicas},
			Status: appsv1.DeploymentStatus{
				ObservedGeneration: o.Status.ObservedGeneration,
				Replicas:           o.Status.Replicas,
				ReadyReplicas:      o.Status.ReadyReplicas,
			},
		}
		if len(o.Status.Conditions) > 0 {
			d.Status.Conditions = make([]appsv1.DeploymentCondition, len(o.Status.Conditions))
			for i, c := range o.Status.Conditions {
				d.Status.Conditions[i] = appsv1.DeploymentCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message}
			}
		}
		return d, nil
	case *batchv1.Job:
		j := &batchv1.Job{
			ObjectMeta: slimMeta(&o.ObjectMeta),
			Spec:       batchv1.JobSpec{BackoffLimit: o.Spec.BackoffLimit},
			Status: batchv1.JobStatus{
				StartTime: o.Status.StartTime,
				Active:    o.Status.Active,
				Succeeded: o.Status.Succeeded,
				Failed:    o.Status.Failed,
				Ready:     o.Status.Ready,
			},
		}
		if len(o.Status.Conditions) > 0 {
			j.Status.Conditions = make([]batchv1.JobCondition, len(o.Status.Conditions))
			for i, c := range o.Status.Conditions {
				j.Status.Conditions[i] = batchv1.JobCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message}
			}
		}
		return j, nil
	}
	return obj, nil
}

var _ cache.TransformFunc = slim

func slimMeta(m *metav1.ObjectMeta) metav1.ObjectMeta {
	out := metav1.ObjectMeta{
		Name:              m.Name,
		Namespace:         m.Namespace,
		UID:               m.UID,
		Generation:        m.Generation,
		ResourceVersion:   m.ResourceVersion,
		DeletionTimestamp: m.DeletionTimestamp,
	}
	if v, ok := m.Labels[WorkloadLabel]; ok {
		out.Labels = map[string]string{WorkloadLabel: v}
	}
	return out
}
