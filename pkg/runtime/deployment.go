package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/spec"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// deploymentKind is a service: a Deployment of one replica and, with a port
// and --expose, a ClusterIP Service <name>-svc. Start and stop scale it to 1
// and 0 through the scale subresource (pause is stop: a deployment has no
// suspension, and scaled to 0 it keeps everything but its pods); restart is
// a rollout restart, as kubectl rollout restart does it; delete removes the
// Service, then the Deployment in the foreground.
type deploymentKind struct{}

func (deploymentKind) Resource() string { return "deployment.apps" }

func (deploymentKind) Name() string { return runtimeid.KindDeployment }

func (deploymentKind) Build(s spec.ContainerSpec, meta metav1.ObjectMeta, tmpl corev1.PodTemplateSpec) (Objects, error) {
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyAlways
	// Only the deployment's pods carry it: its Service selects them alone,
	// never a job's pods of the same name. The Deployment's own selector
	// stays gobrave-workload (immutable, and older deployments have it).
	tmpl.Labels[LabelKind] = runtimeid.KindDeployment
	deadline, err := s.ProgressDeadlineSeconds()
	if err != nil {
		return Objects{}, err
	}
	objs := Objects{Deployment: &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: meta,
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelWorkload: s.Name}},
			Template: tmpl,
		},
	}}
	if deadline > 0 {
		objs.Deployment.Spec.ProgressDeadlineSeconds = &deadline
	}
	if s.ExposeService && s.ExposedPort > 0 {
		svcMeta := objectMeta(s, meta.Namespace)
		svcMeta.Name = ServiceName(s.Name)
		objs.Service = &corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: svcMeta,
			Spec: corev1.ServiceSpec{
				Type:     corev1.ServiceTypeClusterIP,
				Selector: map[string]string{LabelWorkload: s.Name, LabelKind: runtimeid.KindDeployment},
				Ports: []corev1.ServicePort{{
					Name:       "port-" + fmt.Sprint(s.ExposedPort),
					Protocol:   corev1.ProtocolTCP,
					Port:       s.ExposedPort,
					TargetPort: intstr.FromInt32(s.ExposedPort),
				}},
			},
		}
	}
	return objs, nil
}

func (deploymentKind) Create(ctx context.Context, c kubernetes.Interface, namespace string, objs Objects) (Created, error) {
	d := objs.Deployment
	dep, err := c.AppsV1().Deployments(namespace).Create(ctx, d, metav1.CreateOptions{})
	if err != nil {
		return Created{}, createError("deployment", d.Name, namespace, err)
	}
	out := Created{UID: string(dep.UID)}
	if objs.Service == nil {
		return out, nil
	}
	if _, err := c.CoreV1().Services(namespace).Create(ctx, objs.Service, metav1.CreateOptions{}); err != nil {
		// Roll back: a deployment without the service the user asked for is half-made.
		rbErr := c.AppsV1().Deployments(namespace).Delete(context.WithoutCancel(ctx), d.Name, metav1.DeleteOptions{
			Preconditions:     &metav1.Preconditions{UID: &dep.UID},
			PropagationPolicy: ptr(metav1.DeletePropagationBackground),
		})
		if rbErr != nil && !apierrors.IsNotFound(rbErr) {
			return Created{}, errors.Join(createError("service", objs.Service.Name, namespace, err),
				fmt.Errorf("roll back deployment %s/%s: %w (delete it with 'kubectl delete deployment -n %s %s')", namespace, d.Name, rbErr, namespace, d.Name))
		}
		return Created{}, createError("service", objs.Service.Name, namespace, err)
	}
	out.Service = objs.Service.Name
	return out, nil
}

func (deploymentKind) PlanStart(id runtimeid.ID, obj metav1.Object) (StartPlan, error) {
	if obj == nil {
		return StartPlan{}, fmt.Errorf("start %s: the deployment %w (create it again with 'kubectl gobrave create')", id, ErrGone)
	}
	return StartPlan{UID: string(obj.GetUID()), Message: "scale to 1"}, nil
}

// PlanRestart: a rollout restart of the recorded deployment.
func (deploymentKind) PlanRestart(id runtimeid.ID, obj metav1.Object) (StartPlan, error) {
	if obj == nil {
		return StartPlan{}, fmt.Errorf("restart %s: the deployment %w (create it again with 'kubectl gobrave create')", id, ErrGone)
	}
	return StartPlan{UID: string(obj.GetUID()), Restart: true, Message: "rollout restart (new pods from the same template), scale to 1"}, nil
}

func (deploymentKind) Start(ctx context.Context, c kubernetes.Interface, id runtimeid.ID, plan StartPlan, _ *spec.ContainerSpec) (StartResult, error) {
	if plan.Restart {
		return StartResult{UID: plan.UID}, restartRollout(ctx, c, id, plan.UID)
	}
	uid, err := scale(ctx, c, id, 1, types.UID(plan.UID))
	return StartResult{UID: uid}, err
}

// RestartedAtAnnotation is the pod template annotation kubectl rollout
// restart sets: a new value makes the deployment controller roll out new
// pods from an otherwise unchanged template.
const RestartedAtAnnotation = "kubectl.kubernetes.io/restartedAt"

// restartRollout sets the restartedAt annotation of the deployment's pod
// template to now and its replicas to 1, in one update (retried on
// conflict), so that a stopped service restarts too. A new template also
// resets the Progressing condition, so a deployment that exceeded its
// progress deadline gets a new one.
func restartRollout(ctx context.Context, c kubernetes.Interface, id runtimeid.ID, uid string) error {
	deps := c.AppsV1().Deployments(id.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := deps.Get(ctx, id.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if uid != "" && string(d.UID) != uid {
			return fmt.Errorf("the deployment %w: another deployment of the name has uid %s", ErrGone, d.UID)
		}
		if d.Spec.Template.Annotations == nil {
			d.Spec.Template.Annotations = map[string]string{}
		}
		d.Spec.Template.Annotations[RestartedAtAnnotation] = time.Now().Format(time.RFC3339Nano)
		d.Spec.Replicas = ptr(int32(1))
		_, err = deps.Update(ctx, d, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("restart %s: %w", id, err)
	}
	return nil
}

func (deploymentKind) Stop(ctx context.Context, c kubernetes.Interface, id runtimeid.ID, uid types.UID) (bool, error) {
	_, err := scale(ctx, c, id, 0, uid)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// StopExpect: a deployment scaled to 0 has exited.
func (deploymentKind) StopExpect() store.EventType { return store.ContainerExited }

func (deploymentKind) StopAction() string { return "scale to 0" }

// Pause of a deployment is its stop: scaled to 0.
func (k deploymentKind) Pause(ctx context.Context, c kubernetes.Interface, id runtimeid.ID, uid types.UID) (bool, error) {
	return k.Stop(ctx, c, id, uid)
}

// PauseExpect: a paused deployment has exited, as a stopped one.
func (deploymentKind) PauseExpect() store.EventType { return store.ContainerExited }

func (deploymentKind) PauseAction() string { return "scale to 0" }

func (deploymentKind) Delete(ctx context.Context, c kubernetes.Interface, id runtimeid.ID, uid types.UID) (bool, error) {
	// The deployment first, under its UID precondition: a replaced one
	// fails here with a Conflict, before its Service is touched.
	opts := metav1.DeleteOptions{PropagationPolicy: ptr(metav1.DeletePropagationForeground)}
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	err := c.AppsV1().Deployments(id.Namespace).Delete(ctx, id.Name, opts)
	found := !apierrors.IsNotFound(err)
	if err != nil && found {
		return false, fmt.Errorf("delete %s: %w", id, err)
	}
	err = c.CoreV1().Services(id.Namespace).Delete(ctx, ServiceName(id.Name), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return found, fmt.Errorf("delete %s: service %s: %w", id, ServiceName(id.Name), err)
	}
	return found, nil
}

// PlanUpdate: the new template goes to the deployment now; it rolls out
// when the deployment has replicas (a stopped one takes it at its start).
func (deploymentKind) PlanUpdate(id runtimeid.ID, obj metav1.Object, recorded spec.ContainerSpec) (UpdatePlan, error) {
	d, _ := obj.(*appsv1.Deployment)
	if d == nil {
		return UpdatePlan{}, fmt.Errorf("update %s: the deployment %w (create it again with 'kubectl gobrave create')", id, ErrGone)
	}
	if d.DeletionTimestamp != nil {
		return UpdatePlan{}, fmt.Errorf("update %s: the deployment is being deleted", id)
	}
	p := UpdatePlan{UID: string(d.UID), Send: true, InSync: carries(d.Annotations, recorded)}
	if d.Spec.Replicas == nil || *d.Spec.Replicas > 0 {
		p.Rollout = true
		p.Message = "roll out the new pod template"
	} else {
		p.Message = "change the pod template (scaled to 0: it runs at the next start)"
	}
	return p, nil
}

// carries reports whether annotations hold s as the gobrave.dev/spec
// annotation of an object built from it.
func carries(annotations map[string]string, s spec.ContainerSpec) bool {
	raw, ok := annotations[AnnotationSpec]
	if !ok {
		return false
	}
	var got spec.ContainerSpec
	if err := json.Unmarshal([]byte(raw), &got); err != nil {
		return false
	}
	s.Normalize()
	// The namespace is the object's: create leaves it out of the
	// annotation unless the spec named it.
	got.RuntimeNamespace, s.RuntimeNamespace = "", ""
	a, erra := json.Marshal(got)
	b, errb := json.Marshal(s)
	return erra == nil && errb == nil && string(a) == string(b)
}

// Update replaces the deployment's pod template, labels, progress deadline
// and spec annotation with those of objs, in one update of the object read
// (retried on conflict), keeping its replicas: the deployment controller
// rolls the new template out as kubectl set image does. The Service is not
// touched (update refuses a change of port or exposure).
func (deploymentKind) Update(ctx context.Context, c kubernetes.Interface, id runtimeid.ID, plan UpdatePlan, objs Objects) error {
	want := objs.Deployment
	if want == nil {
		return fmt.Errorf("update %s: no deployment built", id)
	}
	deps := c.AppsV1().Deployments(id.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := deps.Get(ctx, id.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if plan.UID != "" && string(d.UID) != plan.UID {
			return apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, id.Name,
				fmt.Errorf("the deployment now has uid %s, not %s: another object of the name, left alone", d.UID, plan.UID))
		}
		d.Spec.Template = *want.Spec.Template.DeepCopy()
		d.Spec.ProgressDeadlineSeconds = want.Spec.ProgressDeadlineSeconds
		d.Labels = want.Labels
		if d.Annotations == nil {
			d.Annotations = map[string]string{}
		}
		d.Annotations[AnnotationSpec] = want.Annotations[AnnotationSpec]
		_, err = deps.Update(ctx, d, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("update %s: %w", id, err)
	}
	return nil
}

func (deploymentKind) Get(ctx context.Context, c kubernetes.Interface, namespace, name string) (metav1.Object, error) {
	return c.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (deploymentKind) Observe(obj any) (Observation, bool) {
	d, _ := obj.(*appsv1.Deployment)
	return DeploymentEvent(d)
}

func (deploymentKind) Informer(f informers.SharedInformerFactory) cache.SharedIndexInformer {
	return f.Apps().V1().Deployments().Informer()
}

// DeploymentEvent maps the status of a Deployment to an observation; false
// means there is nothing to report yet. A ready replica is a start only when
// no new template is rolling out (see rollingOut): after an update the old
// pods stay ready until the new ones are.
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
		return Observation{Type: store.ContainerExited, Message: "0", UID: uid, Result: store.Result{Reason: store.ReasonStopped}}, true
	}
	for _, c := range d.Status.Conditions {
		failed := (c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue) ||
			(c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded")
		if failed {
			msg := conditionMessage(c.Reason, c.Message)
			if msg == "" {
				msg = string(c.Type)
			}
			reason := c.Reason
			if reason == "" {
				reason = string(c.Type)
			}
			return Observation{Type: store.ContainerFailed, Message: msg, UID: uid,
				Result: store.Result{Reason: reason, FinishedAt: timeOf(&c.LastTransitionTime)}}, true
		}
	}
	if want > 0 && d.Status.ReadyReplicas > 0 && d.DeletionTimestamp == nil && !rollingOut(d, want) {
		return Observation{Type: store.ContainerStarted, UID: uid}, true
	}
	return Observation{}, false
}

// rollingOut reports whether the deployment controller's status says a new
// pod template is still rolling out, as kubectl rollout status reads it:
// with a Progressing condition (the controller has judged the rollout),
// until it says NewReplicaSetAvailable and every replica is updated and
// available with no old one left. The old pods are ready meanwhile. (A
// rollback to an older template re-uses its ReplicaSet and keeps the old
// NewReplicaSetAvailable condition for a while: the counts tell.)
func rollingOut(d *appsv1.Deployment, want int32) bool {
	for _, c := range d.Status.Conditions {
		if c.Type != appsv1.DeploymentProgressing || c.Status != corev1.ConditionTrue {
			continue
		}
		st := d.Status
		return (c.Reason != "" && c.Reason != "NewReplicaSetAvailable") ||
			st.UpdatedReplicas < want || st.Replicas > st.UpdatedReplicas || st.AvailableReplicas < st.UpdatedReplicas
	}
	return false
}

// Slim keeps spec.replicas, the status counters (ready, updated, available:
// rollingOut reads them) and the conditions' type,
// status, reason and message.
func (deploymentKind) Slim(obj any) (any, bool) {
	o, ok := obj.(*appsv1.Deployment)
	if !ok {
		return nil, false
	}
	d := &appsv1.Deployment{
		ObjectMeta: slimMeta(&o.ObjectMeta),
		Spec:       appsv1.DeploymentSpec{Replicas: o.Spec.Replicas},
		Status: appsv1.DeploymentStatus{
			ObservedGeneration: o.Status.ObservedGeneration,
			Replicas:           o.Status.Replicas,
			ReadyReplicas:      o.Status.ReadyReplicas,
			UpdatedReplicas:    o.Status.UpdatedReplicas,
			AvailableReplicas:  o.Status.AvailableReplicas,
		},
	}
	if len(o.Status.Conditions) > 0 {
		d.Status.Conditions = make([]appsv1.DeploymentCondition, len(o.Status.Conditions))
		for i, c := range o.Status.Conditions {
			d.Status.Conditions[i] = appsv1.DeploymentCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message, LastTransitionTime: c.LastTransitionTime}
		}
	}
	return d, true
}

// scale sets a deployment's replicas through the scale subresource, retrying
// on conflict, and returns the deployment's UID.
func scale(ctx context.Context, c kubernetes.Interface, id runtimeid.ID, replicas int32, want types.UID) (string, error) {
	deps := c.AppsV1().Deployments(id.Namespace)
	var uid string
	var other bool
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sc, err := deps.GetScale(ctx, id.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		uid = string(sc.UID)
		if want != "" && sc.UID != "" && sc.UID != want {
			// Another deployment of the name: not ours to scale. (The
			// update below carries the scale's resourceVersion, so the
			// object read here is the one scaled.)
			other = true
			return nil
		}
		if sc.Spec.Replicas == replicas {
			return nil
		}
		sc.Spec.Replicas = replicas
		_, err = deps.UpdateScale(ctx, id.Name, sc, metav1.UpdateOptions{})
		return err
	})
	if err == nil && other {
		err = apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, id.Name,
			fmt.Errorf("the deployment now has uid %s, not %s: another object of the name, left alone", uid, want))
	}
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
