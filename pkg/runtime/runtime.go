package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/spec"
)

// ErrGone is returned by Start for a job that no longer exists in the
// cluster and whose spec is unknown, so it cannot be created again.
var ErrGone = errors.New("workload no longer exists in the cluster")

// Runtime carries out lifecycle operations for one runtime name (k8s or k3s)
// on one cluster.
type Runtime struct {
	Client kubernetes.Interface
	// Name is the runtime name that prefixes the IDs this runtime creates.
	Name string
}

// New returns a runtime named name over client.
func New(client kubernetes.Interface, name string) *Runtime {
	return &Runtime{Client: client, Name: name}
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

// Create validates s, runs the image preflight and creates its objects in
// namespace. Nothing is left half-made: if the Service cannot be created the
// Deployment is deleted again.
func (r *Runtime) Create(ctx context.Context, s spec.ContainerSpec, namespace string) (Created, error) {
	if err := s.Validate(); err != nil {
		return Created{}, err
	}
	if err := EnsureImage(s); err != nil {
		return Created{}, err
	}
	s.Normalize()
	id, err := runtimeid.New(r.Name, namespace, s.Kind(), s.Name)
	if err != nil {
		return Created{}, err
	}
	objs, err := Build(s, namespace)
	if err != nil {
		return Created{}, err
	}
	if objs.Job != nil {
		job, err := r.Client.BatchV1().Jobs(namespace).Create(ctx, objs.Job, metav1.CreateOptions{})
		if err != nil {
			return Created{}, createError("job", s.Name, namespace, err)
		}
		return Created{ID: id, UID: string(job.UID)}, nil
	}

	dep, err := r.Client.AppsV1().Deployments(namespace).Create(ctx, objs.Deployment, metav1.CreateOptions{})
	if err != nil {
		return Created{}, createError("deployment", s.Name, namespace, err)
	}
	out := Created{ID: id, UID: string(dep.UID)}
	if objs.Service != nil {
		if _, err := r.Client.CoreV1().Services(namespace).Create(ctx, objs.Service, metav1.CreateOptions{}); err != nil {
			// Roll back: a deployment without the service the user asked for is half-made.
			rbErr := r.Client.AppsV1().Deployments(namespace).Delete(ctx, s.Name, metav1.DeleteOptions{
				Preconditions:     &metav1.Preconditions{UID: &dep.UID},
				PropagationPolicy: ptr(metav1.DeletePropagationBackground),
			})
			if rbErr != nil && !apierrors.IsNotFound(rbErr) {
				return Created{}, errors.Join(createError("service", objs.Service.Name, namespace, err),
					fmt.Errorf("roll back deployment %s/%s: %w (delete it with 'kubectl delete deployment -n %s %s')", namespace, s.Name, rbErr, namespace, s.Name))
			}
			return Created{}, createError("service", objs.Service.Name, namespace, err)
		}
		out.Service = objs.Service.Name
	}
	return out, nil
}

func createError(kind, name, namespace string, err error) error {
	if apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create %s %q in namespace %q: it already exists (choose another name, or remove it with 'kubectl gobrave delete' or kubectl): %w", kind, name, namespace, err)
	}
	return fmt.Errorf("create %s %q in namespace %q: %w", kind, name, namespace, err)
}

// StartResult tells what Start did.
type StartResult struct {
	UID string
	// Recreated is true when a job was created again from its spec.
	Recreated bool
}

// Start starts a workload: a deployment is scaled to 1; a job is verified to
// exist. A job that is gone (stop deletes jobs) or has already finished is
// created again from s, so stop and start work for jobs too. s may be nil
// when the spec is unknown; then a gone job is an ErrGone error.
func (r *Runtime) Start(ctx context.Context, id runtimeid.ID, s *spec.ContainerSpec) (StartResult, error) {
	switch id.Kind {
	case runtimeid.KindDeployment:
		uid, err := r.scale(ctx, id, 1)
		return StartResult{UID: uid}, err
	case runtimeid.KindJob:
		jobs := r.Client.BatchV1().Jobs(id.Namespace)
		job, err := jobs.Get(ctx, id.Name, metav1.GetOptions{})
		switch {
		case err == nil && !jobFinished(job):
			return StartResult{UID: string(job.UID)}, nil
		case err == nil:
			if s == nil {
				return StartResult{}, fmt.Errorf("start %s: the job has finished and its spec is unknown here, so it cannot run again", id)
			}
			if err := r.deleteJobAndWait(ctx, id); err != nil {
				return StartResult{}, err
			}
		case apierrors.IsNotFound(err):
			if s == nil {
				return StartResult{}, fmt.Errorf("start %s: %w and was never recorded here, so it cannot be created again (create it with 'kubectl gobrave create')", id, ErrGone)
			}
		default:
			return StartResult{}, fmt.Errorf("start %s: %w", id, err)
		}
		objs, err := Build(*s, id.Namespace)
		if err != nil {
			return StartResult{}, err
		}
		created, err := jobs.Create(ctx, objs.Job, metav1.CreateOptions{})
		if err != nil {
			return StartResult{}, fmt.Errorf("start %s: %w", id, createError("job", id.Name, id.Namespace, err))
		}
		return StartResult{UID: string(created.UID), Recreated: true}, nil
	}
	return StartResult{}, fmt.Errorf("start %s: unknown kind %q", id, id.Kind)
}

func jobFinished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// deleteJobAndWait deletes the finished job so it can be created again under
// its name, and waits until it is gone.
func (r *Runtime) deleteJobAndWait(ctx context.Context, id runtimeid.ID) error {
	jobs := r.Client.BatchV1().Jobs(id.Namespace)
	err := jobs.Delete(ctx, id.Name, metav1.DeleteOptions{PropagationPolicy: ptr(metav1.DeletePropagationBackground)})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("start %s: remove the finished job before running it again: %w", id, err)
	}
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := jobs.Get(ctx, id.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		return fmt.Errorf("start %s: wait for the finished job to be removed: %w", id, err)
	}
	return nil
}

// Stop stops a workload: a deployment is scaled to 0, a job is deleted with
// foreground propagation. It returns whether the object was there.
func (r *Runtime) Stop(ctx context.Context, id runtimeid.ID) (found bool, err error) {
	switch id.Kind {
	case runtimeid.KindDeployment:
		_, err := r.scale(ctx, id, 0)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	case runtimeid.KindJob:
		err := r.Client.BatchV1().Jobs(id.Namespace).Delete(ctx, id.Name, metav1.DeleteOptions{
			PropagationPolicy: ptr(metav1.DeletePropagationForeground),
		})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("stop %s: %w", id, err)
		}
		return true, nil
	}
	return false, fmt.Errorf("stop %s: unknown kind %q", id, id.Kind)
}

// scale sets a deployment's replicas through the scale subresource, retrying
// on conflict, and returns the deployment's UID.
func (r *Runtime) scale(ctx context.Context, id runtimeid.ID, replicas int32) (string, error) {
	deps := r.Client.AppsV1().Deployments(id.Namespace)
	var uid string
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sc, err := deps.GetScale(ctx, id.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		uid = string(sc.UID)
		if sc.Spec.Replicas == replicas {
			return nil
		}
		sc.Spec.Replicas = replicas
		_, err = deps.UpdateScale(ctx, id.Name, sc, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		verb := "start"
		if replicas == 0 {
			verb = "stop"
		}
		if apierrors.IsNotFound(err) {
			return "", fmt.Errorf("%s %s: %w", verb, id, err)
		}
		return "", fmt.Errorf("%s %s: scale deployment to %d: %w", verb, id, replicas, err)
	}
	return uid, nil
}

// Delete removes a workload: the Service <name>-svc (not found is fine) and
// then the Deployment, or the Job with foreground propagation. It returns
// whether the workload itself was still there.
func (r *Runtime) Delete(ctx context.Context, id runtimeid.ID) (found bool, err error) {
	switch id.Kind {
	case runtimeid.KindDeployment:
		err := r.Client.CoreV1().Services(id.Namespace).Delete(ctx, ServiceName(id.Name), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("delete %s: service %s: %w", id, ServiceName(id.Name), err)
		}
		err = r.Client.AppsV1().Deployments(id.Namespace).Delete(ctx, id.Name, metav1.DeleteOptions{
			PropagationPolicy: ptr(metav1.DeletePropagationForeground),
		})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("delete %s: %w", id, err)
		}
		return true, nil
	case runtimeid.KindJob:
		found, err := r.Stop(ctx, id)
		if err != nil {
			return false, fmt.Errorf("delete %s: %w", id, errors.Unwrap(err))
		}
		return found, nil
	}
	return false, fmt.Errorf("delete %s: unknown kind %q", id, id.Kind)
}

// Exists reports whether the workload object exists and returns its UID.
func (r *Runtime) Exists(ctx context.Context, id runtimeid.ID) (string, bool, error) {
	var (
		obj metav1.Object
		err error
	)
	switch id.Kind {
	case runtimeid.KindDeployment:
		var d *appsv1.Deployment
		d, err = r.Client.AppsV1().Deployments(id.Namespace).Get(ctx, id.Name, metav1.GetOptions{})
		obj = d
	case runtimeid.KindJob:
		var j *batchv1.Job
		j, err = r.Client.BatchV1().Jobs(id.Namespace).Get(ctx, id.Name, metav1.GetOptions{})
		obj = j
	default:
		return "", false, fmt.Errorf("unknown kind %q", id.Kind)
	}
	if apierrors.IsNotFound(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return string(obj.GetUID()), true, nil
}
