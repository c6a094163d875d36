package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
)

// ErrNoPod is returned when a workload has no pod (yet).
var ErrNoPod = errors.New("no pod found")

// NewestPod returns the newest pod labelled gobrave-workload=<name> in the
// ID's namespace. With running set, only pods in phase Running count.
func (r *Runtime) NewestPod(ctx context.Context, id runtimeid.ID, running bool) (*corev1.Pod, error) {
	pods, err := r.Client.CoreV1().Pods(id.Namespace).List(ctx, metav1.ListOptions{LabelSelector: Selector(id.Name)})
	if err != nil {
		return nil, fmt.Errorf("list pods of %s: %w", id, err)
	}
	var newest *corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
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
		return nil, fmt.Errorf("%w: %s has no %s (labelled %s in namespace %s); it may still be starting or is stopped: check 'kubectl gobrave inspect %s'", ErrNoPod, id, what, Selector(id.Name), id.Namespace, id)
	}
	return newest, nil
}

// newer orders pods by creation time, then by name for a stable choice.
func newer(a, b *corev1.Pod) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return b.CreationTimestamp.Before(&a.CreationTimestamp)
	}
	return a.Name > b.Name
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

// Logs streams the logs of the workload's newest pod to w as they arrive;
// nothing is buffered whole.
func (r *Runtime) Logs(ctx context.Context, id runtimeid.ID, o LogOptions, w io.Writer) error {
	pod, err := r.NewestPod(ctx, id, false)
	if err != nil {
		return err
	}
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
	stream, err := r.Client.CoreV1().Pods(id.Namespace).GetLogs(pod.Name, opts).Stream(ctx)
	if err != nil {
		return fmt.Errorf("logs of %s (pod %s): %w", id, pod.Name, err)
	}
	defer stream.Close()
	if _, err := io.Copy(w, stream); err != nil && ctx.Err() == nil {
		return fmt.Errorf("logs of %s (pod %s): %w", id, pod.Name, err)
	}
	return nil
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
	// Exists is false when the workload object is gone from the cluster.
	Exists bool   `json:"exists"`
	UID    string `json:"uid,omitempty"`
}

// Inspect reads the workload, its newest pod and (for deployments) its
// Service. A workload without pods is not an error: the pod fields are empty.
func (r *Runtime) Inspect(ctx context.Context, id runtimeid.ID) (Info, error) {
	var info Info
	uid, exists, err := r.Exists(ctx, id)
	if err != nil {
		return info, fmt.Errorf("inspect %s: %w", id, err)
	}
	info.Exists, info.UID = exists, uid
	if !exists {
		return info, nil
	}
	pod, err := r.NewestPod(ctx, id, false)
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
