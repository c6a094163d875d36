package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/gobrave/kubectl-gobrave/pkg/spec"
)

// ErrPodsRefused is wrapped by CheckPods when the namespace's admission
// (Pod Security, an admission policy) refuses the workload's pods.
var ErrPodsRefused = errors.New("its pods would be refused")

// PodTemplate returns the pod template of the workload in o.
func (o Objects) PodTemplate() *corev1.PodTemplateSpec {
	switch {
	case o.Deployment != nil:
		return &o.Deployment.Spec.Template
	case o.Job != nil:
		return &o.Job.Spec.Template
	}
	return nil
}

// Items are the objects in the order they are created: the workload, then
// its Service.
func (o Objects) Items() []k8sruntime.Object {
	var out []k8sruntime.Object
	if o.Deployment != nil {
		out = append(out, o.Deployment)
	}
	if o.Job != nil {
		out = append(out, o.Job)
	}
	if o.Service != nil {
		out = append(out, o.Service)
	}
	return out
}

// DryRun sends each object of objs to the API server with dryRun=All, as
// kubectl's --dry-run=server does: admission (Pod Security's warnings,
// quotas, webhooks without side effects) and validation answer, nothing is
// stored. It returns the objects as the server would have stored them
// (defaults filled in; without managedFields, as kubectl prints objects),
// or the first refusal. Pod Security judges pods,
// not templates: check the pod template with CheckPods first.
func DryRun(ctx context.Context, c kubernetes.Interface, namespace string, objs Objects) (Objects, error) {
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	var out Objects
	if d := objs.Deployment; d != nil {
		got, err := c.AppsV1().Deployments(namespace).Create(ctx, d, dry)
		if err != nil {
			return Objects{}, createError("deployment", d.Name, namespace, err)
		}
		got.TypeMeta, got.ManagedFields = d.TypeMeta, nil
		out.Deployment = got
	}
	if j := objs.Job; j != nil {
		got, err := c.BatchV1().Jobs(namespace).Create(ctx, j, dry)
		if err != nil {
			return Objects{}, createError("job", j.Name, namespace, err)
		}
		got.TypeMeta, got.ManagedFields = j.TypeMeta, nil
		out.Job = got
	}
	if svc := objs.Service; svc != nil {
		got, err := c.CoreV1().Services(namespace).Create(ctx, svc, dry)
		if err != nil {
			return Objects{}, createError("service", svc.Name, namespace, err)
		}
		got.TypeMeta, got.ManagedFields = svc.TypeMeta, nil
		out.Service = got
	}
	return out, nil
}

// CheckPods asks the API server whether namespace admits the pods the
// workload's controller will make, before anything is created: a
// server-side dry-run create of a Pod built from the pod template of objs.
// Pod Security admission judges pods only: a Deployment or Job whose
// template violates the namespace's level is admitted with a warning, and
// the controller's pod creation then fails (FailedCreate). Nothing is
// stored by a dry run.
//
// A refusal is an error wrapping ErrPodsRefused with the server's reason
// (and, for the restricted level, the hint to pass --security-profile
// restricted). The check is skipped (nil) when the user may not create
// pods (docs/rbac.yaml grants it; without it the controller's FailedCreate
// still fails a wait of a deployment), when the namespace's default
// ServiceAccount does not exist yet (the controller retries until it does)
// and when an admission webhook with side effects makes dry runs
// impossible.
func CheckPods(ctx context.Context, c kubernetes.Interface, namespace string, s spec.ContainerSpec, objs Objects, kind string) error {
	tmpl := objs.PodTemplate()
	if tmpl == nil {
		return nil
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: s.Name + "-",
			Namespace:    namespace,
			Labels:       tmpl.Labels,
			Annotations:  tmpl.Annotations,
		},
		Spec: *tmpl.Spec.DeepCopy(),
	}
	_, err := c.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err == nil {
		return nil
	}
	msg := err.Error()
	switch {
	case apierrors.IsForbidden(err) && strings.Contains(msg, `cannot create resource "pods"`):
		return nil // RBAC: the dry run is not allowed, the check cannot be made
	case apierrors.IsForbidden(err) && strings.Contains(msg, "error looking up service account"):
		return nil // a new namespace's default ServiceAccount is not there yet
	case apierrors.IsBadRequest(err) && strings.Contains(msg, "does not support dry run"):
		return nil // an admission webhook with side effects: the dry run cannot be made
	case apierrors.IsForbidden(err) || apierrors.IsInvalid(err):
		reason := msg
		if _, after, ok := strings.Cut(msg, " is forbidden: "); ok {
			reason = after // drop the dry-run pod's generated name
		}
		hint := ""
		if strings.Contains(reason, `violates PodSecurity "restricted`) && s.SecurityProfile != spec.ProfileRestricted {
			hint = " (the namespace enforces the restricted Pod Security level: pass --security-profile restricted, and --user UID if the image runs as root)"
		} else if strings.Contains(reason, "violates PodSecurity") {
			hint = " (the namespace's pod-security.kubernetes.io/enforce label sets the level; see docs/security.md)"
		}
		return fmt.Errorf("create %s %q in namespace %q: %w: %s%s", kind, s.Name, namespace, ErrPodsRefused, reason, hint)
	}
	return fmt.Errorf("create %s %q in namespace %q: check its pods with a dry run: %w", kind, s.Name, namespace, err)
}
