package runtime

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fakeForward stands in for client-go's port-forwarder: it records the pods
// forwarded to, reports ready and holds until told to drop or ctx ends.
type fakeForward struct {
	mu    sync.Mutex
	pods  []string
	drop  chan error
	fails error // returned at once, before ready
}

func (f *fakeForward) forward(ctx context.Context, pod *corev1.Pod, ready func()) error {
	f.mu.Lock()
	f.pods = append(f.pods, pod.Name)
	fails := f.fails
	f.mu.Unlock()
	if fails != nil {
		return fails
	}
	ready()
	select {
	case <-ctx.Done():
		return nil
	case err := <-f.drop:
		return err
	}
}

func (f *fakeForward) list() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.pods, ",")
}

type moves struct {
	mu    sync.Mutex
	lines []string
}

func (m *moves) moved(from, to *corev1.Pod, why string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lines = append(m.lines, from.Name+" -> "+to.Name+": "+why)
}

func (m *moves) list() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return strings.Join(m.lines, "; ")
}

// TestPortForwardFollowsReplacement: the forward goes to the newest running,
// ready pod owned by the deployment (never a newer look-alike or a pod that
// is not ready), moves to the replacement when that pod is deleted, back
// onto a pod that lost its connection, and ends with nil on cancel.
func TestPortForwardFollowsReplacement(t *testing.T) {
	now := time.Now()
	id := mustID(t, "k8s-default|deployment|web")
	c := newWatchedFake(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "dep-web"}},
		readyPod(pod("lookalike-9", "default", "web", now.Add(time.Hour), corev1.PodRunning), "uid-look"))
	notReady := readyPod(pod("web-0", "default", "web", now.Add(time.Minute), corev1.PodRunning), "uid-web-0")
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	addOwned(t, c.Clientset, id, "dep-web", readyPod(pod("web-1", "default", "web", now, corev1.PodRunning), "uid-web-1"), notReady)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	f := &fakeForward{drop: make(chan error)}
	var m moves
	done := make(chan error, 1)
	go func() {
		done <- New(c, "k8s").PortForward(ctx, id, "dep-web", ForwardOptions{PodRunningTimeout: 30 * time.Second, Moved: m.moved, Retry: time.Millisecond}, f.forward)
	}()
	eventually(t, "a forward to web-1", func() bool { return f.list() == "web-1" })
	c.waitWatch(t, "pods", "replicasets")

	// The replacement comes up, then the old pod goes.
	p2 := controlledBy(readyPod(pod("web-2", "default", "web", now.Add(2*time.Minute), corev1.PodRunning), "uid-web-2"), "ReplicaSet", "rs-dep-web")
	if _, err := c.CoreV1().Pods("default").Create(ctx, p2, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.CoreV1().Pods("default").Delete(ctx, "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a forward to web-2", func() bool { return f.list() == "web-1,web-2" })
	if got, want := m.list(), "web-1 -> web-2: was deleted"; got != want {
		t.Errorf("moves = %q, want %q", got, want)
	}
	// The connection drops while the pod stays: forward to it again.
	f.drop <- errors.New("lost connection to pod")
	eventually(t, "a second forward to web-2", func() bool { return f.list() == "web-1,web-2,web-2" })
	if got := m.list(); !strings.HasSuffix(got, "web-2 -> web-2: lost its connection (lost connection to pod)") {
		t.Errorf("moves = %q", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("PortForward after cancel = %v, want nil", err)
	}
}

// TestPortForwardErrors: no usable pod within the timeout is ErrNoPod
// naming the flag; a forward refused before it was ready is returned, not
// retried.
func TestPortForwardErrors(t *testing.T) {
	id := mustID(t, "k8s-default|deployment|web")
	c := newWatchedFake(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "dep-web"}})
	pending := pod("web-1", "default", "web", time.Now(), corev1.PodPending)
	addOwned(t, c.Clientset, id, "dep-web", pending)
	f := &fakeForward{fails: errors.New("forwarded to a pod that is not running")}
	err := New(c, "k8s").PortForward(t.Context(), id, "dep-web", ForwardOptions{PodRunningTimeout: time.Second}, f.forward)
	if !errors.Is(err, ErrNoPod) || !strings.Contains(err.Error(), "--pod-running-timeout") {
		t.Errorf("PortForward(no running pod) = %v, want ErrNoPod naming --pod-running-timeout", err)
	}
	if f.list() != "" {
		t.Errorf("forwarded to %s", f.list())
	}

	c2 := newWatchedFake(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "dep-web"}})
	addOwned(t, c2.Clientset, id, "dep-web", readyPod(pod("web-1", "default", "web", time.Now(), corev1.PodRunning), "uid-web-1"))
	f2 := &fakeForward{fails: errors.New(`pods "web-1" is forbidden`)}
	err = New(c2, "k8s").PortForward(t.Context(), id, "dep-web", ForwardOptions{PodRunningTimeout: time.Minute}, f2.forward)
	if err == nil || !strings.Contains(err.Error(), "forbidden") || f2.list() != "web-1" {
		t.Errorf("PortForward(refused) = %v after forwards to %q, want the refusal after one try", err, f2.list())
	}
}
