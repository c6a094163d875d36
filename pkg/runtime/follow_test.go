package runtime

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// watchedFake is newFake that tells when a watch of a resource is
// established: the fake does not replay what a watch missed, so a test
// changes pods only once the informer watches them.
type watchedFake struct {
	*fake.Clientset
	mu      sync.Mutex
	watches map[string]int
}

func newWatchedFake(objs ...k8sruntime.Object) *watchedFake {
	c := &watchedFake{Clientset: newFake(objs...), watches: map[string]int{}}
	c.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := a.(k8stesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		w, err := c.Tracker().Watch(a.GetResource(), a.GetNamespace(), opts)
		if err != nil {
			return true, nil, err
		}
		c.mu.Lock()
		c.watches[a.GetResource().Resource]++
		c.mu.Unlock()
		return true, w, nil
	})
	return c
}

func (c *watchedFake) waitWatch(t *testing.T, resources ...string) {
	t.Helper()
	eventually(t, "watches of "+strings.Join(resources, ", "), func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, r := range resources {
			if c.watches[r] == 0 {
				return false
			}
		}
		return true
	})
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 5*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// running gives p a running container (restarts times restarted).
func running(p *corev1.Pod, restarts int32) *corev1.Pod {
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{RestartCount: restarts,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	return p
}

// opened records the pods whose logs FollowLogs opened, in order.
type opened struct {
	mu    sync.Mutex
	pods  []string
	bytes bytes.Buffer
}

type nopCloser struct {
	io.Writer
}

func (nopCloser) Close() error { return nil }

func (o *opened) open(pod string) io.WriteCloser {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pods = append(o.pods, pod)
	return nopCloser{&lockedWriter{o}}
}

type lockedWriter struct{ o *opened }

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.o.mu.Lock()
	defer w.o.mu.Unlock()
	return w.o.bytes.Write(p)
}

func (o *opened) list() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return strings.Join(o.pods, ",")
}

// TestFollowLogsOntoNewPods: with Follow, the newest pod is read with the
// tail asked for, a pod that replaces it (owned by the deployment's new
// ReplicaSet) and a container restarted in place are read whole, and
// look-alike pods and older pods of the rollout never are.
func TestFollowLogsOntoNewPods(t *testing.T) {
	now := time.Now()
	id := mustID(t, "k8s-default|deployment|web")
	c := newWatchedFake(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "dep-web"}})
	addOwned(t, c.Clientset, id, "dep-web",
		running(pod("web-old", "default", "web", now.Add(-time.Hour), corev1.PodRunning), 0),
		running(pod("web-1", "default", "web", now, corev1.PodRunning), 0))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var o opened
	var warned []error
	done := make(chan error, 1)
	go func() {
		done <- New(c, "k8s").FollowLogs(ctx, id, "dep-web", LogOptions{Tail: 7, Follow: true}, o.open, func(err error) { warned = append(warned, err) })
	}()
	eventually(t, "the newest pod's log", func() bool { return o.list() == "web-1" })
	c.waitWatch(t, "pods", "replicasets")

	// A look-alike (labelled, owned by nothing) and a replacement pod of a
	// new ReplicaSet of the deployment.
	if _, err := c.CoreV1().Pods("default").Create(ctx, running(pod("lookalike-9", "default", "web", now.Add(time.Hour), corev1.PodRunning), 0), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rs := controlledBy(replicaSet("web-rs2", "default", "web", "rs-2"), "Deployment", "dep-web")
	if _, err := c.AppsV1().ReplicaSets("default").Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p2 := controlledBy(pod("web-2", "default", "web", now.Add(time.Minute), corev1.PodPending), "ReplicaSet", "rs-2")
	p2.UID = "uid-web-2"
	if _, err := c.CoreV1().Pods("default").Create(ctx, p2, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Pending: no log yet. Running: read.
	if _, err := c.CoreV1().Pods("default").Update(ctx, running(p2.DeepCopy(), 0), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the replacement pod's log", func() bool { return o.list() == "web-1,web-2" })
	// Its container restarts in place: a new instance, read again.
	if _, err := c.CoreV1().Pods("default").Update(ctx, running(p2.DeepCopy(), 1), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the restarted container's log", func() bool { return o.list() == "web-1,web-2,web-2" })

	// open runs before the stream's request is sent (on its own
	// goroutine): wait for the third log request before reading them.
	logRequests := func() []k8stesting.Action {
		var out []k8stesting.Action
		for _, a := range c.Actions() {
			if a.GetSubresource() == "log" {
				out = append(out, a)
			}
		}
		return out
	}
	eventually(t, "three log requests", func() bool { return len(logRequests()) >= 3 })
	var tails []string
	for _, a := range logRequests() {
		lo := a.(k8stesting.GenericAction).GetValue().(*corev1.PodLogOptions)
		if !lo.Follow {
			t.Errorf("a log request without follow: %+v", lo)
		}
		if lo.TailLines == nil {
			tails = append(tails, "all")
		} else {
			tails = append(tails, "7")
		}
	}
	if got := strings.Join(tails, ","); got != "7,all,all" {
		t.Errorf("log requests' tails = %s, want 7 for the first pod, all for the later ones", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("FollowLogs after cancel = %v, want nil", err)
	}
	if len(warned) != 0 {
		t.Errorf("warnings: %v", warned)
	}
	if got := o.list(); strings.Contains(got, "lookalike") || strings.Contains(got, "web-old") {
		t.Errorf("read %s", got)
	}
}

// TestFollowLogsJobEnds: following a job ends once its pods' logs have
// ended and the job has completed, even when it completes afterwards.
func TestFollowLogsJobEnds(t *testing.T) {
	id := mustID(t, "k8s-default|job|task")
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "task", Namespace: "default", UID: "job-task"}}
	c := newWatchedFake(job)
	addOwned(t, c.Clientset, id, "job-task", running(pod("task-1", "default", "task", time.Now(), corev1.PodRunning), 0))
	var o opened
	done := make(chan error, 1)
	go func() {
		done <- New(c, "k8s").FollowLogs(t.Context(), id, "job-task", LogOptions{Tail: -1, Follow: true}, o.open, func(error) {})
	}()
	eventually(t, "the job's pod's log", func() bool { return o.list() == "task-1" })
	c.waitWatch(t, "pods", "jobs")
	select {
	case err := <-done:
		t.Fatalf("FollowLogs ended (%v) while the job still runs", err)
	default:
	}
	job = job.DeepCopy()
	job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	if _, err := c.BatchV1().Jobs("default").UpdateStatus(t.Context(), job, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("FollowLogs = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("FollowLogs did not end after the job completed")
	}
}

// TestFollowLogsNoPod: following a workload without pods is ErrNoPod, as
// without follow.
func TestFollowLogsNoPod(t *testing.T) {
	id := mustID(t, "k8s-default|deployment|web")
	c := newWatchedFake(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "dep-web"}})
	var o opened
	err := New(c, "k8s").FollowLogs(t.Context(), id, "dep-web", LogOptions{Follow: true}, o.open, func(error) {})
	if !errors.Is(err, ErrNoPod) {
		t.Errorf("FollowLogs = %v, want ErrNoPod", err)
	}
}

func readyPod(p *corev1.Pod, uid types.UID) *corev1.Pod {
	p.UID = uid
	return running(p, 0)
}

// TestFollowLogsPrevious: the previous instance's log is complete, so -f -p
// reads it once and returns.
func TestFollowLogsPrevious(t *testing.T) {
	id := mustID(t, "k8s-default|deployment|web")
	c := newWatchedFake(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "dep-web"}})
	addOwned(t, c.Clientset, id, "dep-web", running(pod("web-1", "default", "web", time.Now(), corev1.PodRunning), 1))
	var o opened
	if err := New(c, "k8s").FollowLogs(t.Context(), id, "dep-web", LogOptions{Tail: -1, Follow: true, Previous: true}, o.open, func(error) {}); err != nil {
		t.Fatal(err)
	}
	for _, a := range c.Actions() {
		if a.GetSubresource() == "log" {
			if lo := a.(k8stesting.GenericAction).GetValue().(*corev1.PodLogOptions); !lo.Previous {
				t.Errorf("log request %+v, want previous", lo)
			}
		}
	}
	if o.list() != "web-1" {
		t.Errorf("read %q", o.list())
	}
}
