package runtime

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/spec"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// Kind is everything that differs between workload kinds, as kubectl's
// polymorphichelpers keep it: how a spec becomes objects, what start, stop
// and delete do, how its status maps to observed events, what the informer
// cache keeps of it and how it is read. One value per kind, one file per
// kind (deployment.go, job.go), listed once in kinds below. Nothing else
// switches on a kind.
type Kind interface {
	// Name is the kind as runtime IDs spell it.
	Name() string
	// Resource is the kind's resource.group, as kubectl prints it
	// (deployment.apps/web).
	Resource() string

	// Build wraps the pod template of s into the kind's objects (pure).
	Build(s spec.ContainerSpec, meta metav1.ObjectMeta, tmpl corev1.PodTemplateSpec) (Objects, error)
	// Create creates objs (built by Build) in namespace. Nothing is left
	// half-made when it fails.
	Create(ctx context.Context, c kubernetes.Interface, namespace string, objs Objects) (Created, error)

	// PlanStart says, from the object as read (nil when it is not in the
	// cluster), what Start will do, so that the intent recorded before it
	// can say so (StartPlan.Replace). Pure.
	PlanStart(id runtimeid.ID, obj metav1.Object) (StartPlan, error)
	// Start carries out plan. s is the recorded spec (nil when unknown).
	Start(ctx context.Context, c kubernetes.Interface, id runtimeid.ID, plan StartPlan, s *spec.ContainerSpec) (StartResult, error)
	// PlanRestart is PlanStart for a restart: a new run whatever the
	// object's state (a deployment's rollout restart, a job deleted and
	// created again). Pure.
	PlanRestart(id runtimeid.ID, obj metav1.Object) (StartPlan, error)
	// Stop stops the workload and says whether its object was there.
	//
	// uid, in Stop, Pause and Delete, is the object the verb is about (the
	// engine read it just before); when set, an object of the name with
	// another UID (replaced meanwhile) is left alone and the call fails
	// with a Conflict. "" acts on whatever object has the name.
	Stop(ctx context.Context, c kubernetes.Interface, id runtimeid.ID, uid types.UID) (found bool, err error)
	// StopExpect is the observed event that completes a stop: the store's
	// state machine reads it (a job's stop ends with its deletion).
	StopExpect() store.EventType
	// StopAction says what a stop does, for the StopRequested event.
	StopAction() string
	// Pause pauses the workload and says whether its object was there.
	Pause(ctx context.Context, c kubernetes.Interface, id runtimeid.ID, uid types.UID) (found bool, err error)
	// PauseExpect is the observed event that completes a pause (a job's
	// pause is its suspension, a deployment's a stop).
	PauseExpect() store.EventType
	// PauseAction says what a pause does, for the PauseRequested event.
	PauseAction() string
	// Delete removes the workload (and what belongs to it) and says
	// whether its object was there.
	Delete(ctx context.Context, c kubernetes.Interface, id runtimeid.ID, uid types.UID) (found bool, err error)

	// PlanUpdate says, from the object as read (nil when it is not in the
	// cluster) and the spec the record has, what Update will do with a new
	// spec: whether it is sent to the object now and rolls out. Pure.
	PlanUpdate(id runtimeid.ID, obj metav1.Object, recorded spec.ContainerSpec) (UpdatePlan, error)
	// Update puts objs (built by Build from the new spec) on the object
	// plan.UID, when plan.Send: its pod template, its spec annotation and
	// what else the spec decides. A replaced object fails with a Conflict.
	Update(ctx context.Context, c kubernetes.Interface, id runtimeid.ID, plan UpdatePlan, objs Objects) error

	// Get reads the object (full, not slimmed).
	Get(ctx context.Context, c kubernetes.Interface, namespace, name string) (metav1.Object, error)
	// Observe maps the object's status to an observation; false means
	// nothing to report yet. Pure.
	Observe(obj any) (Observation, bool)
	// Slim keeps what Observe and the monitor read, for the informer cache;
	// ok is false when obj is not of this kind.
	Slim(obj any) (slim any, ok bool)
	// Informer is the kind's shared informer in f.
	Informer(f informers.SharedInformerFactory) cache.SharedIndexInformer
}

// kinds lists every workload kind, by name. Adding a kind: its file, its
// line here, its name in runtimeid.Kinds.
var kinds = map[string]Kind{
	runtimeid.KindDeployment: deploymentKind{},
	runtimeid.KindJob:        jobKind{},
}

// KindOf returns the kind named name.
func KindOf(name string) (Kind, error) {
	if k, ok := kinds[name]; ok {
		return k, nil
	}
	return nil, fmt.Errorf("unknown workload kind %q (one of deployment, job)", name)
}

// Observation is what was seen of one Kubernetes object: an observed event
// type, its message, the UID of the object it is about and its structured
// result (reason, exit code, start and finish times; see store.Result). The
// store decides whether it changes the workload's state.
type Observation struct {
	Type    store.EventType
	Message string
	UID     string
	store.Result
}

// Equal reports whether o and p say the same (their pointers may differ).
func (o Observation) Equal(p Observation) bool {
	return o.Type == p.Type && o.Message == p.Message && o.UID == p.UID && o.Reason == p.Reason &&
		equalPtr(o.ExitCode, p.ExitCode, func(a, b int32) bool { return a == b }) &&
		equalPtr(o.StartedAt, p.StartedAt, time.Time.Equal) &&
		equalPtr(o.FinishedAt, p.FinishedAt, time.Time.Equal)
}

func equalPtr[T any](a, b *T, eq func(T, T) bool) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return eq(*a, *b)
}

// timeOf is a Kubernetes time as a result's time: nil when unset.
func timeOf(t *metav1.Time) *time.Time {
	if t == nil || t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// exitCode is a known exit code.
func exitCode(c int32) *int32 { return &c }

// Deleted is the observation for an object that is gone (a delete event, a
// tombstone, a NotFound lookup, or an object of the same name with another UID).
func Deleted(uid types.UID) Observation {
	return Observation{Type: store.ContainerDeleted, UID: string(uid)}
}

// Observe maps a Deployment or a Job through its kind.
func Observe(obj any) (Observation, bool) {
	for _, k := range kinds {
		if _, ok := k.Slim(obj); ok {
			return k.Observe(obj)
		}
	}
	return Observation{}, false
}

// Slim is the informers' transform: it keeps only what the mapping and the
// monitor read (name, namespace, uid, generation, resourceVersion,
// deletionTimestamp, the gobrave-workload label, and what the kind's Observe
// reads), so that thousands of cached workloads stay small. Pods and
// ReplicaSets are slimmed by SlimPod and SlimReplicaSet. Objects of other
// types (tombstones) pass unchanged.
func Slim(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Pod:
		return SlimPod(o), nil
	case *appsv1.ReplicaSet:
		return SlimReplicaSet(o), nil
	}
	for _, k := range kinds {
		if s, ok := k.Slim(obj); ok {
			return s, nil
		}
	}
	return obj, nil
}

var _ cache.TransformFunc = Slim

func slimMeta(m *metav1.ObjectMeta) metav1.ObjectMeta {
	out := metav1.ObjectMeta{
		Name:              m.Name,
		Namespace:         m.Namespace,
		UID:               m.UID,
		Generation:        m.Generation,
		ResourceVersion:   m.ResourceVersion,
		DeletionTimestamp: m.DeletionTimestamp,
	}
	if v, ok := m.Labels[LabelWorkload]; ok {
		out.Labels = map[string]string{LabelWorkload: v}
	}
	return out
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

// StartPlan is what Start will do, read before the intent is recorded.
type StartPlan struct {
	// UID is the object's UID when it exists.
	UID string
	// Replace: the object is (or will be) gone and a new one is created
	// from the spec; the record forgets UID until it sees the new object.
	Replace bool
	// Leave: nothing to change (a job that is still running).
	Leave bool
	// Unsuspend: the object is a suspended job, to be unsuspended (its
	// completions kept).
	Unsuspend bool
	// Restart: a rollout restart of the object (new pods from the same
	// template), which also scales it to 1.
	Restart bool
	// Message says what Start will do, for the StartRequested event.
	Message string
}

// UpdatePlan is what Update will do, read before the intent is recorded.
type UpdatePlan struct {
	// UID is the object's UID when it exists.
	UID string
	// Send: the new spec goes to the object now (a deployment's template).
	Send bool
	// Rollout: sending it makes new pods now (a deployment with replicas):
	// the record is starting until they run.
	Rollout bool
	// InSync: the object carries the recorded spec (its gobrave.dev/spec
	// annotation), so an update to that same spec has nothing to do.
	InSync bool
	// Message says what Update will do, for the SpecUpdated event.
	Message string
}

// StartResult tells what Start did.
type StartResult struct {
	UID string
	// Recreated is true when a job was created again from its spec.
	Recreated bool
}
