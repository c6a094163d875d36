package lifecycle_test

// The simulated cluster of the model-based test: a fake clientset whose
// reactors do what the API server does that the fake's tracker does not
// (UIDs and generations, the scale subresource, foreground deletion with a
// finalizer, UID preconditions), and explicit controller steps that do what
// the deployment, job and garbage collector controllers do, one object at a
// time and only when the test says so, so that a status can lag its spec.

import (
	"fmt"
	"slices"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
)

const namespace = "default"

var (
	deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	jobsGVR        = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
	podsGVR        = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
)

// workload names one of the model's workloads: a kind and a name.
type workload struct{ kind, name string }

func (w workload) String() string { return w.kind + "/" + w.name }

func (w workload) id() runtimeid.ID {
	return runtimeid.ID{Runtime: runtimeid.RuntimeK8s, Namespace: namespace, Kind: w.kind, Name: w.name}
}

func (w workload) gvr() schema.GroupVersionResource {
	if w.kind == runtimeid.KindJob {
		return jobsGVR
	}
	return deploymentsGVR
}

// workloads are the fixed IDs the model acts on; web exposes a Service.
var workloads = []workload{
	{runtimeid.KindDeployment, "web"},
	{runtimeid.KindDeployment, "api"},
	{runtimeid.KindJob, "task"},
	{runtimeid.KindJob, "batch"},
}

// Job outcomes, as the job controller ends a run.
const (
	jobComplete = "complete"
	jobFailed   = "failed"
)

// cluster is the API server and its controllers.
type cluster struct {
	*fake.Clientset

	mu    sync.Mutex
	next  int
	uids  map[types.UID]workload // every object ever created, by UID
	ended map[types.UID]string   // how each job run ended (jobComplete, jobFailed)
}

func newCluster() *cluster {
	c := &cluster{Clientset: fake.NewClientset(), uids: map[types.UID]workload{}, ended: map[types.UID]string{}}
	c.PrependReactor("create", "*", c.create)
	c.PrependReactor("delete", "*", c.delete)
	c.PrependReactor("get", "deployments", c.getScale)
	c.PrependReactor("update", "deployments", c.updateScale)
	c.PrependReactor("update", "deployments", c.updateDeployment)
	return c
}

// existed reports whether an object with uid was ever created.
func (c *cluster) existed(uid string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.uids[types.UID(uid)]
	return ok
}

// endOf is how the job run with uid ended ("" when it did not).
func (c *cluster) endOf(uid string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ended[types.UID(uid)]
}

// create stamps a UID, generation 1 and a creation time, as the API server does.
func (c *cluster) create(a k8stesting.Action) (bool, k8sruntime.Object, error) {
	if ca, ok := a.(k8stesting.CreateActionImpl); ok && len(ca.CreateOptions.DryRun) > 0 {
		return true, ca.GetObject(), nil // a dry run admitted: nothing stored
	}
	obj := a.(k8stesting.CreateAction).GetObject().DeepCopyObject()
	m, err := meta.Accessor(obj)
	if err != nil {
		return true, nil, err
	}
	c.mu.Lock()
	c.next++
	uid := types.UID(fmt.Sprintf("uid-%d", c.next))
	c.mu.Unlock()
	m.SetUID(uid)
	m.SetGeneration(1)
	m.SetCreationTimestamp(metav1.Now())
	gvr := a.GetResource()
	if err := c.Tracker().Create(gvr, obj, a.GetNamespace()); err != nil {
		return true, nil, err
	}
	c.mu.Lock()
	c.uids[uid] = workload{kind: kindOf(gvr), name: m.GetName()}
	c.mu.Unlock()
	got, err := c.Tracker().Get(gvr, a.GetNamespace(), m.GetName())
	return true, got, err
}

func kindOf(gvr schema.GroupVersionResource) string {
	switch gvr {
	case deploymentsGVR:
		return runtimeid.KindDeployment
	case jobsGVR:
		return runtimeid.KindJob
	}
	return gvr.Resource
}

// delete honours a UID precondition and the propagation policy: a
// foreground deletion of a deployment or a job sets deletionTimestamp and
// the foregroundDeletion finalizer, and the object goes at a later
// controller step; a background deletion drops that finalizer, and an
// object left without finalizers goes at once (what the API server does
// with an object that the garbage collector holds for its dependents).
func (c *cluster) delete(a k8stesting.Action) (bool, k8sruntime.Object, error) {
	da := a.(k8stesting.DeleteAction)
	gvr, ns, name := a.GetResource(), a.GetNamespace(), da.GetName()
	obj, err := c.Tracker().Get(gvr, ns, name)
	if err != nil {
		return true, nil, err
	}
	obj = obj.DeepCopyObject()
	m, err := meta.Accessor(obj)
	if err != nil {
		return true, nil, err
	}
	opts := da.GetDeleteOptions()
	if p := opts.Preconditions; p != nil && p.UID != nil && *p.UID != m.GetUID() {
		return true, nil, apierrors.NewConflict(gvr.GroupResource(), name,
			fmt.Errorf("precondition failed: UID in precondition: %s, UID in object meta: %s", *p.UID, m.GetUID()))
	}
	fin := slices.DeleteFunc(slices.Clone(m.GetFinalizers()), func(f string) bool { return f == metav1.FinalizerDeleteDependents })
	foreground := opts.PropagationPolicy != nil && *opts.PropagationPolicy == metav1.DeletePropagationForeground
	if opts.PropagationPolicy == nil {
		foreground = slices.Contains(m.GetFinalizers(), metav1.FinalizerDeleteDependents)
	}
	if foreground && (gvr == deploymentsGVR || gvr == jobsGVR) {
		fin = append(fin, metav1.FinalizerDeleteDependents)
	}
	if len(fin) == 0 {
		return true, nil, c.removeWithPods(gvr, ns, name, m.GetUID())
	}
	if m.GetDeletionTimestamp() != nil && slices.Equal(fin, m.GetFinalizers()) {
		return true, nil, nil // already being deleted so
	}
	if m.GetDeletionTimestamp() == nil {
		now := metav1.Now()
		m.SetDeletionTimestamp(&now)
	}
	m.SetFinalizers(fin)
	return true, nil, c.Tracker().Update(gvr, obj, ns)
}

// removeWithPods removes an object and the pods a job owned (the garbage
// collector).
func (c *cluster) removeWithPods(gvr schema.GroupVersionResource, ns, name string, uid types.UID) error {
	if err := c.Tracker().Delete(gvr, ns, name); err != nil {
		return err
	}
	if gvr != jobsGVR {
		return nil
	}
	list, err := c.Tracker().List(podsGVR, corev1.SchemeGroupVersion.WithKind("Pod"), ns)
	if err != nil {
		return err
	}
	for _, p := range list.(*corev1.PodList).Items {
		if p.Labels[batchv1.ControllerUidLabel] == string(uid) {
			if err := c.Tracker().Delete(podsGVR, ns, p.Name); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	return nil
}

func (c *cluster) getScale(a k8stesting.Action) (bool, k8sruntime.Object, error) {
	if a.GetSubresource() != "scale" {
		return false, nil, nil
	}
	obj, err := c.Tracker().Get(deploymentsGVR, a.GetNamespace(), a.(k8stesting.GetAction).GetName())
	if err != nil {
		return true, nil, err
	}
	return true, scaleOf(obj.(*appsv1.Deployment)), nil
}

// updateScale sets spec.replicas; a change raises the generation.
func (c *cluster) updateScale(a k8stesting.Action) (bool, k8sruntime.Object, error) {
	if a.GetSubresource() != "scale" {
		return false, nil, nil
	}
	sc := a.(k8stesting.UpdateAction).GetObject().(*autoscalingv1.Scale)
	obj, err := c.Tracker().Get(deploymentsGVR, a.GetNamespace(), sc.Name)
	if err != nil {
		return true, nil, err
	}
	d := obj.(*appsv1.Deployment).DeepCopy()
	if *d.Spec.Replicas != sc.Spec.Replicas {
		d.Spec.Replicas = &sc.Spec.Replicas
		d.Generation++
		if err := c.Tracker().Update(deploymentsGVR, d, d.Namespace); err != nil {
			return true, nil, err
		}
	}
	return true, scaleOf(d), nil
}

// updateDeployment raises the generation when the spec changes (a rollout
// restart's template annotation), as the API server does.
func (c *cluster) updateDeployment(a k8stesting.Action) (bool, k8sruntime.Object, error) {
	if a.GetSubresource() != "" {
		return false, nil, nil
	}
	d := a.(k8stesting.UpdateAction).GetObject().(*appsv1.Deployment).DeepCopy()
	obj, err := c.Tracker().Get(deploymentsGVR, a.GetNamespace(), d.Name)
	if err != nil {
		return true, nil, err
	}
	old := obj.(*appsv1.Deployment)
	if old.UID != d.UID || old.ResourceVersion != d.ResourceVersion {
		return true, nil, apierrors.NewConflict(deploymentsGVR.GroupResource(), d.Name, fmt.Errorf("the object has been modified"))
	}
	d.Generation = old.Generation
	if !equality.Semantic.DeepEqual(old.Spec, d.Spec) {
		d.Generation++
	}
	d.Status = old.Status
	if err := c.Tracker().Update(deploymentsGVR, d, d.Namespace); err != nil {
		return true, nil, err
	}
	got, err := c.Tracker().Get(deploymentsGVR, d.Namespace, d.Name)
	return true, got, err
}

// suspend sets a job's spec.suspend from outside gobrave (kubectl patch,
// Kueue); false when there is no job or nothing changed.
func (c *cluster) suspend(name string, suspend bool) (bool, error) {
	j := c.job(name)
	if j == nil || (j.Spec.Suspend != nil && *j.Spec.Suspend == suspend) {
		return false, nil
	}
	j.Spec.Suspend = &suspend
	return true, c.Tracker().Update(jobsGVR, j, namespace)
}

func scaleOf(d *appsv1.Deployment) *autoscalingv1.Scale {
	return &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: d.Name, Namespace: d.Namespace, UID: d.UID, ResourceVersion: d.ResourceVersion},
		Spec:       autoscalingv1.ScaleSpec{Replicas: *d.Spec.Replicas},
		Status:     autoscalingv1.ScaleStatus{Replicas: d.Status.Replicas},
	}
}

// object returns the live object of w, nil when there is none.
func (c *cluster) object(w workload) metav1.Object {
	obj, err := c.Tracker().Get(w.gvr(), namespace, w.name)
	if err != nil {
		return nil
	}
	m, _ := meta.Accessor(obj)
	return m
}

func (c *cluster) deployment(name string) *appsv1.Deployment {
	obj, err := c.Tracker().Get(deploymentsGVR, namespace, name)
	if err != nil {
		return nil
	}
	return obj.(*appsv1.Deployment).DeepCopy()
}

func (c *cluster) job(name string) *batchv1.Job {
	obj, err := c.Tracker().Get(jobsGVR, namespace, name)
	if err != nil {
		return nil
	}
	return obj.(*batchv1.Job).DeepCopy()
}

// stepOptions says how a controller step ends a running job.
type stepOptions struct {
	outcome string // jobComplete or jobFailed
	pod     bool   // a failed job leaves a pod whose container status tells its exit code
}

// step is one action of the controllers on w's object: the garbage
// collector removes an object being deleted in the foreground; the
// deployment controller brings the status up to the spec (first the
// observed generation and the replica count, then the ready replicas); the
// job controller starts a job's pod, then ends the run as opts says, unless
// only lag is to be caught up (finish false). It reports whether anything
// changed.
func (c *cluster) step(w workload, finish bool, opts stepOptions) (bool, error) {
	if w.kind == runtimeid.KindDeployment {
		return c.stepDeployment(w.name)
	}
	return c.stepJob(w.name, finish, opts)
}

func (c *cluster) stepDeployment(name string) (bool, error) {
	d := c.deployment(name)
	if d == nil {
		return false, nil
	}
	if d.DeletionTimestamp != nil {
		return true, c.removeWithPods(deploymentsGVR, namespace, name, d.UID)
	}
	want := *d.Spec.Replicas
	st := &d.Status
	switch {
	case st.ObservedGeneration < d.Generation:
		st.ObservedGeneration = d.Generation
		st.Replicas, st.UpdatedReplicas = want, want
		st.ReadyReplicas = min(st.ReadyReplicas, want)
		st.AvailableReplicas = st.ReadyReplicas
	case st.ReadyReplicas < want:
		st.ReadyReplicas, st.AvailableReplicas = want, want
	default:
		return false, nil
	}
	return true, c.Tracker().Update(deploymentsGVR, d, namespace)
}

func (c *cluster) stepJob(name string, finish bool, opts stepOptions) (bool, error) {
	j := c.job(name)
	if j == nil {
		return false, nil
	}
	if j.DeletionTimestamp != nil {
		return true, c.removeWithPods(jobsGVR, namespace, name, j.UID)
	}
	if jobEnded(j) {
		return false, nil
	}
	st := &j.Status
	one, zero := int32(1), int32(0)
	suspend := j.Spec.Suspend != nil && *j.Spec.Suspend
	suspended := jobCondition(j, batchv1.JobSuspended)
	switch {
	case suspend && !suspended:
		// The job controller suspends it: its pods go, its start time too.
		st.Active, st.Ready, st.StartTime = 0, &zero, nil
		st.Conditions = setJobCondition(st.Conditions, batchv1.JobCondition{Type: batchv1.JobSuspended, Status: corev1.ConditionTrue, Reason: "JobSuspended", Message: "Job suspended"})
		return true, c.Tracker().Update(jobsGVR, j, namespace)
	case suspend:
		return false, nil
	case suspended:
		// Unsuspended: the controller says so and starts a pod again.
		now := metav1.Now()
		st.Conditions = setJobCondition(st.Conditions, batchv1.JobCondition{Type: batchv1.JobSuspended, Status: corev1.ConditionFalse, Reason: "JobResumed", Message: "Job resumed"})
		st.StartTime, st.Active, st.Ready = &now, 1, &one
		return true, c.Tracker().Update(jobsGVR, j, namespace)
	}
	if st.StartTime == nil {
		now := metav1.Now()
		st.StartTime, st.Active, st.Ready = &now, 1, &one
		return true, c.Tracker().Update(jobsGVR, j, namespace)
	}
	if !finish {
		return false, nil
	}
	now := metav1.Now()
	st.Active, st.Ready, st.CompletionTime = 0, &zero, &now
	if opts.outcome == jobFailed {
		st.Failed = 1
		st.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"},
		}
		if opts.pod {
			if err := c.Tracker().Create(podsGVR, failedPod(j), namespace); err != nil {
				return true, err
			}
		}
	} else {
		st.Succeeded = 1
		st.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue},
		}
	}
	c.mu.Lock()
	c.ended[j.UID] = opts.outcome
	c.mu.Unlock()
	return true, c.Tracker().Update(jobsGVR, j, namespace)
}

// setJobCondition puts cond in place of the condition of its type.
func setJobCondition(cs []batchv1.JobCondition, cond batchv1.JobCondition) []batchv1.JobCondition {
	for i := range cs {
		if cs[i].Type == cond.Type {
			cs[i] = cond
			return cs
		}
	}
	return append(cs, cond)
}

func jobEnded(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// failedPod is the pod of a failed job run, with the exit code the
// monitor's failure lookup reads.
func failedPod(j *batchv1.Job) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: j.Name + "-" + string(j.UID), Namespace: j.Namespace, UID: types.UID("pod-" + string(j.UID)),
			Labels: map[string]string{
				"gobrave-workload": j.Name, batchv1.ControllerUidLabel: string(j.UID), batchv1.JobNameLabel: j.Name,
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: j.Name, UID: j.UID, Controller: new(true)}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{
			Name:  j.Name,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error", FinishedAt: metav1.Now()}},
		}}},
	}
}

// settle runs the controllers until nothing lags: every deletion done,
// every status up to its spec, every job's pod started. Running jobs keep
// running: how a run ends is the test's choice (a controller step).
func (c *cluster) settle() error {
	for range 100 {
		changed := false
		for _, w := range workloads {
			ch, err := c.step(w, false, stepOptions{})
			if err != nil {
				return err
			}
			changed = changed || ch
		}
		if !changed {
			return nil
		}
	}
	return fmt.Errorf("the controllers did not settle")
}
