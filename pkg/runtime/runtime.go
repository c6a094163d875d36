package runtime

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/spec"
)

// ErrGone is returned by Start for a workload that no longer exists in the
// cluster and whose spec is unknown, so it cannot be created again.
var ErrGone = errors.New("no longer exists in the cluster")

// Runtime carries out lifecycle operations for one runtime name (k8s or k3s)
// on one cluster.
type Runtime struct {
	Client kubernetes.Interface
	// Name is the runtime name that prefixes the IDs this runtime creates.
	Name string
	// Warn, when set, is told in one line when a watch of this runtime's
	// (logs --follow, port-forward) cannot list or watch and retries
	// (WatchWarnings); unset, client-go logs each failure itself.
	Warn func(string)
}

// New returns a runtime named name over client.
func New(client kubernetes.Interface, name string) *Runtime {
	return &Runtime{Client: client, Name: name}
}

// ServerAt is " at host:port" of the API server c talks to, for a message
// that must name the address that does not answer; "" for a client
// without one (a fake clientset).
func ServerAt(c kubernetes.Interface) string {
	rc, ok := c.CoreV1().RESTClient().(*rest.RESTClient)
	if !ok || rc == nil || rc.Get().URL() == nil {
		return ""
	}
	return " at " + rc.Get().URL().Host
}

// ResolveNamespace applies the specification's namespace priority: the
// spec's runtimeNamespace, then the runtime profile's namespace, then the
// kubeconfig context's namespace, then default.
func ResolveNamespace(specNS, profileNS, kubeconfigNS string) string {
	for _, ns := range []string{specNS, profileNS, kubeconfigNS} {
		if ns != "" {
			return ns
		}
	}
	return metav1.NamespaceDefault
}

// EnsureImage is the preflight run before anything is created. Pull policy
// Never is refused: the node could only use an image that is already there,
// which gobrave cannot check, and the workload would never start.
func EnsureImage(s spec.ContainerSpec) error {
	if s.Image == "" {
		return fmt.Errorf("%w: image is required (pass --image or set image in the spec file)", spec.ErrInvalid)
	}
	switch corev1.PullPolicy(s.PullPolicy) {
	case "", corev1.PullAlways, corev1.PullIfNotPresent:
		return nil
	case corev1.PullNever:
		return fmt.Errorf("%w: pull policy %q is refused by the image preflight: gobrave cannot verify the image %q is already on the node, so the workload could never start (use Always or IfNotPresent)", spec.ErrInvalid, s.PullPolicy, s.Image)
	default:
		return fmt.Errorf("%w: pull policy %q: use Always or IfNotPresent", spec.ErrInvalid, s.PullPolicy)
	}
}

// Created is the result of Create.
type Created struct {
	ID  runtimeid.ID
	UID string
	// Service is the name of the Service made for the deployment, if any.
	Service string
}

// Prepare validates s, runs the image preflight, normalises it and returns
// the ID it will have in namespace and its kind; nothing touches the cluster.
func (r *Runtime) Prepare(s *spec.ContainerSpec, namespace string) (runtimeid.ID, Kind, error) {
	if err := s.Validate(); err != nil {
		return runtimeid.ID{}, nil, err
	}
	if err := EnsureImage(*s); err != nil {
		return runtimeid.ID{}, nil, err
	}
	s.Normalize()
	id, err := runtimeid.New(r.Name, namespace, s.Kind(), s.Name)
	if err != nil {
		return runtimeid.ID{}, nil, err
	}
	k, err := KindOf(id.Kind)
	if err != nil {
		return runtimeid.ID{}, nil, fmt.Errorf("%w: %v", spec.ErrInvalid, err)
	}
	return id, k, nil
}

// Create validates s, runs the image preflight and creates its objects in
// namespace. Nothing is left half-made: if the Service cannot be created the
// Deployment is deleted again.
func (r *Runtime) Create(ctx context.Context, s spec.ContainerSpec, namespace string) (Created, error) {
	id, k, err := r.Prepare(&s, namespace)
	if err != nil {
		return Created{}, err
	}
	objs, err := Build(s, namespace)
	if err != nil {
		return Created{}, err
	}
	c, err := k.Create(ctx, r.Client, namespace, objs)
	c.ID = id
	return c, err
}

func createError(kind, name, namespace string, err error) error {
	if apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create %s %q in namespace %q: it already exists (choose another name, or remove it with 'kubectl gobrave delete' or kubectl): %w", kind, name, namespace, err)
	}
	return fmt.Errorf("create %s %q in namespace %q: %w", kind, name, namespace, err)
}

// Start starts a workload (see the kinds' PlanStart and Start): a deployment
// is scaled to 1; a job that runs is left alone, one that is gone or
// finished is created again from s. s may be nil when the spec is unknown;
// then a gone job is an ErrGone error.
func (r *Runtime) Start(ctx context.Context, id runtimeid.ID, s *spec.ContainerSpec) (StartResult, error) {
	k, err := KindOf(id.Kind)
	if err != nil {
		return StartResult{}, fmt.Errorf("start %s: %w", id, err)
	}
	obj, err := k.Get(ctx, r.Client, id.Namespace, id.Name)
	switch {
	case apierrors.IsNotFound(err):
		obj = nil
	case err != nil:
		return StartResult{}, fmt.Errorf("start %s: %w", id, err)
	}
	plan, err := k.PlanStart(id, obj)
	if err != nil {
		return StartResult{}, err
	}
	return k.Start(ctx, r.Client, id, plan, s)
}

// Stop stops a workload: a deployment is scaled to 0, a job is deleted with
// foreground propagation. It returns whether the object was there.
func (r *Runtime) Stop(ctx context.Context, id runtimeid.ID) (found bool, err error) {
	k, err := KindOf(id.Kind)
	if err != nil {
		return false, fmt.Errorf("stop %s: %w", id, err)
	}
	return k.Stop(ctx, r.Client, id, "")
}

// Delete removes a workload: the Service <name>-svc (not found is fine) and
// then the Deployment, or the Job with foreground propagation. It returns
// whether the workload itself was still there.
func (r *Runtime) Delete(ctx context.Context, id runtimeid.ID) (found bool, err error) {
	k, err := KindOf(id.Kind)
	if err != nil {
		return false, fmt.Errorf("delete %s: %w", id, err)
	}
	return k.Delete(ctx, r.Client, id, "")
}

// Exists reports whether the workload object exists and returns its UID.
func (r *Runtime) Exists(ctx context.Context, id runtimeid.ID) (string, bool, error) {
	k, err := KindOf(id.Kind)
	if err != nil {
		return "", false, err
	}
	obj, err := k.Get(ctx, r.Client, id.Namespace, id.Name)
	if apierrors.IsNotFound(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return string(obj.GetUID()), true, nil
}
