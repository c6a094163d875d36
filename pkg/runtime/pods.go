package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
)

// ErrNoPod is returned when a workload has no pod (yet).
var ErrNoPod = errors.New("no pod found")

// NewestPod returns the newest pod owned by the recorded object uid of the
// workload id: for a job, a pod whose controller is that Job; for a
// deployment, a pod whose controller is a ReplicaSet whose controller is that
// Deployment. A pod that only carries the gobrave-workload label (another
// kind's pod of the same name, or anyone's look-alike) is never chosen. An
// empty uid (a record older than UIDs) means the object that has the name
// now. With running set, only pods in phase Running count.
func (r *Runtime) NewestPod(ctx context.Context, id runtimeid.ID, uid string, running bool) (*corev1.Pod, error) {
	return r.newestPod(ctx, id, uid, running, false)
}

// NewestCurrentPod is NewestPod of the pods made from the workload's current
// pod template: for a deployment, only the pods of the ReplicaSet whose
// template is the Deployment's (the one its controller rolls out; one more
// request, a GET of the Deployment). During a rollout, and a rollback above
// all, the newest pod may still be one of an older template — one that
// cannot pull its image, say — which says nothing about the template being
// rolled out. For a job it is NewestPod.
func (r *Runtime) NewestCurrentPod(ctx context.Context, id runtimeid.ID, uid string) (*corev1.Pod, error) {
	return r.newestPod(ctx, id, uid, false, true)
}

func (r *Runtime) newestPod(ctx context.Context, id runtimeid.ID, uid string, running, current bool) (*corev1.Pod, error) {
	if uid == "" {
		got, exists, err := r.Exists(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("find the pods of %s: %w", id, err)
		}
		if !exists {
			return nil, fmt.Errorf("%w: %s no longer exists in the cluster, so it has no pods: check 'kubectl gobrave inspect %s'", ErrNoPod, id, id)
		}
		uid = got
	}
	var (
		pods []corev1.Pod
		err  error
	)
	switch id.Kind {
	case runtimeid.KindJob:
		pods, err = r.jobPods(ctx, id, uid)
	case runtimeid.KindDeployment:
		pods, err = r.deploymentPods(ctx, id, uid, current)
	default:
		err = fmt.Errorf("unknown kind %q", id.Kind)
	}
	if err != nil {
		return nil, fmt.Errorf("list pods of %s: %w", id, err)
	}
	var newest *corev1.Pod
	for i := range pods {
		p := &pods[i]
		if running && p.Status.Phase != corev1.PodRunning {
			continue
		}
		if newest == nil || newer(p, newest) {
			newest = p
		}
	}
	if newest == nil {
		what := "pod"
		if running {
			what = "running pod"
		}
		return nil, fmt.Errorf("%w: %s has no %s owned by %s/%s (UID %s) in namespace %s; it may still be starting or is stopped: check 'kubectl gobrave inspect %s'", ErrNoPod, id, what, id.Kind, id.Name, uid, id.Namespace, id)
	}
	return newest, nil
}

// jobPods returns the pods whose controller is the Job uid. The job
// controller's label narrows the list; the owner reference decides.
func (r *Runtime) jobPods(ctx context.Context, id runtimeid.ID, uid string) ([]corev1.Pod, error) {
	pods, err := r.Client.CoreV1().Pods(id.Namespace).List(ctx, metav1.ListOptions{LabelSelector: batchv1.ControllerUidLabel + "=" + uid})
	if err != nil {
		return nil, err
	}
	return ownedPods(pods.Items, map[types.UID]bool{types.UID(uid): true}), nil
}

// deploymentPods returns the pods whose controller is a ReplicaSet whose
// controller is the Deployment uid: one ReplicaSet list and one pod list, both
// narrowed by the gobrave-workload label and decided by owner references.
// With current, only the ReplicaSet whose pod template is the Deployment's
// counts (a GET of the Deployment first; none when it is another object now).
func (r *Runtime) deploymentPods(ctx context.Context, id runtimeid.ID, uid string, current bool) ([]corev1.Pod, error) {
	var template *corev1.PodTemplateSpec
	if current {
		d, err := r.Client.AppsV1().Deployments(id.Namespace).Get(ctx, id.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if d.UID != types.UID(uid) {
			return nil, nil
		}
		template = &d.Spec.Template
	}
	sel := metav1.ListOptions{LabelSelector: Selector(id.Name)}
	rss, err := r.Client.AppsV1().ReplicaSets(id.Namespace).List(ctx, sel)
	if err != nil {
		return nil, err
	}
	owners := map[types.UID]bool{}
	for i := range rss.Items {
		rs := &rss.Items[i]
		if ref := metav1.GetControllerOf(rs); ref == nil || ref.UID != types.UID(uid) {
			continue
		}
		if template != nil && !equalIgnoreHash(&rs.Spec.Template, template) {
			continue
		}
		owners[rs.UID] = true
	}
	if len(owners) == 0 {
		return nil, nil
	}
	pods, err := r.Client.CoreV1().Pods(id.Namespace).List(ctx, sel)
	if err != nil {
		return nil, err
	}
	return ownedPods(pods.Items, owners), nil
}

// equalIgnoreHash reports whether a ReplicaSet's pod template is the
// Deployment's: equal but for the pod-template-hash label the deployment
// controller adds to its ReplicaSets. It is the controller's own rule (and
// kubectl rollout's, in k8s.io/kubectl/pkg/util/deployment, unexported
// there).
func equalIgnoreHash(rs, d *corev1.PodTemplateSpec) bool {
	a, b := rs.DeepCopy(), d.DeepCopy()
	delete(a.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	delete(b.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	return apiequality.Semantic.DeepEqual(a, b)
}

// PodOwners is the set of controller UIDs whose pods belong to the workload
// object uid of kind: a Job's own UID; a Deployment's ReplicaSets, those of
// rss it controls.
func PodOwners(kind string, uid types.UID, rss []*appsv1.ReplicaSet) map[types.UID]bool {
	owners := map[types.UID]bool{}
	switch kind {
	case runtimeid.KindJob:
		owners[uid] = true
	case runtimeid.KindDeployment:
		for _, rs := range rss {
			if ref := metav1.GetControllerOf(rs); ref != nil && ref.UID == uid {
				owners[rs.UID] = true
			}
		}
	}
	return owners
}

// ownedPods keeps the pods whose controller owner reference is one of owners.
func ownedPods(pods []corev1.Pod, owners map[types.UID]bool) []corev1.Pod {
	var out []corev1.Pod
	for i := range pods {
		if ref := metav1.GetControllerOf(&pods[i]); ref != nil && owners[ref.UID] {
			out = append(out, pods[i])
		}
	}
	return out
}

// newer orders pods by creation time, then by name for a stable choice.
// Creation times have whole seconds: a rollout's new pod is often made in
// the second of the old one it replaces (an update right after a rollout).
// Of two pods of the same second, one whose container waits (its image
// cannot be pulled …) is taken as the newer: the old pod of a rollout was
// running, and the new one's trouble is what a wait must see.
func newer(a, b *corev1.Pod) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return b.CreationTimestamp.Before(&a.CreationTimestamp)
	}
	if wa, wb := containerWaits(a), containerWaits(b); wa != wb {
		return wa
	}
	return a.Name > b.Name
}

// containerWaits reports whether a container of p waits (not yet started,
// or backing off).
func containerWaits(p *corev1.Pod) bool {
	for _, cs := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
		if cs.State.Waiting != nil {
			return true
		}
	}
	return false
}

// LogOptions select what Logs streams.
type LogOptions struct {
	// Tail is the number of lines from the end; negative means all.
	Tail       int64
	Follow     bool
	Previous   bool
	Timestamps bool
	// Since limits the logs to this recent a window (0 = no limit).
	Since time.Duration
}

// DefaultTail is the number of lines Logs shows by default.
const DefaultTail = 200

// Logs streams the logs of the newest pod of the recorded object uid (see
// NewestPod) to w as they arrive; nothing is buffered whole.
func (r *Runtime) Logs(ctx context.Context, id runtimeid.ID, uid string, o LogOptions, w io.Writer) error {
	pod, err := r.NewestPod(ctx, id, uid, false)
	if err != nil {
		return err
	}
	return r.streamPod(ctx, id, pod, o, w)
}

// podLogOptions are the PodLogOptions of o for the first container of pod.
func (o LogOptions) podLogOptions(id runtimeid.ID, pod *corev1.Pod) *corev1.PodLogOptions {
	opts := &corev1.PodLogOptions{
		Container:  id.Name,
		Follow:     o.Follow,
		Previous:   o.Previous,
		Timestamps: o.Timestamps,
	}
	if len(pod.Spec.Containers) > 0 {
		opts.Container = pod.Spec.Containers[0].Name
	}
	if o.Tail >= 0 {
		opts.TailLines = &o.Tail
	}
	if o.Since > 0 {
		secs := int64(o.Since.Round(time.Second).Seconds())
		if secs < 1 {
			secs = 1
		}
		opts.SinceSeconds = &secs
	}
	return opts
}

// Info is what Inspect finds in the cluster about a workload.
type Info struct {
	// IPAddress is the Service DNS name for an exposed deployment, else the pod IP.
	IPAddress string `json:"ipAddress"`
	NodeName  string `json:"nodeName"`
	PodName   string `json:"podName"`
	PodPhase  string `json:"podPhase"`
	Image     string `json:"image"`
	Ready     bool   `json:"ready"`
	Restarts  int32  `json:"restarts"`
	// PodReason and PodMessage say why the newest pod does not run (see
	// PodStatusOf): a container's waiting reason or Unschedulable.
	PodReason  string `json:"podReason"`
	PodMessage string `json:"podMessage"`
	// LastTermination is how a container of the newest pod last ended (a
	// crash-looping container's last exit code and reason).
	LastTermination *Termination `json:"lastTermination"`
	// Exists is false when the workload object is gone from the cluster.
	Exists bool   `json:"exists"`
	UID    string `json:"uid,omitempty"`
}

// Inspect reads the workload, the newest pod of the recorded object uid (an
// empty uid: of the object there now) and, for deployments, its Service. A
// workload without pods is not an error: the pod fields are empty.
func (r *Runtime) Inspect(ctx context.Context, id runtimeid.ID, uid string) (Info, error) {
	var info Info
	live, exists, err := r.Exists(ctx, id)
	if err != nil {
		return info, fmt.Errorf("inspect %s: %w", id, err)
	}
	info.Exists, info.UID = exists, live
	if !exists {
		return info, nil
	}
	if uid == "" {
		uid = live
	}
	pod, err := r.NewestPod(ctx, id, uid, false)
	if err != nil && !errors.Is(err, ErrNoPod) {
		return info, fmt.Errorf("inspect %s: %w", id, err)
	}
	if pod != nil {
		info.PodName = pod.Name
		info.PodPhase = string(pod.Status.Phase)
		info.NodeName = pod.Spec.NodeName
		info.IPAddress = pod.Status.PodIP
		if len(pod.Spec.Containers) > 0 {
			info.Image = pod.Spec.Containers[0].Image
		}
		for _, cs := range pod.Status.ContainerStatuses {
			info.Restarts += cs.RestartCount
		}
		ps := PodStatusOf(pod)
		info.PodReason, info.PodMessage, info.LastTermination = ps.Reason, ps.Message, ps.LastTermination
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady {
				info.Ready = c.Status == corev1.ConditionTrue
			}
		}
	}
	if id.Kind == runtimeid.KindDeployment {
		_, err := r.Client.CoreV1().Services(id.Namespace).Get(ctx, ServiceName(id.Name), metav1.GetOptions{})
		switch {
		case err == nil:
			info.IPAddress = ServiceDNS(id.Name, id.Namespace)
		case !apierrors.IsNotFound(err):
			return info, fmt.Errorf("inspect %s: service %s: %w", id, ServiceName(id.Name), err)
		}
	}
	return info, nil
}
