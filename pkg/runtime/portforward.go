package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
)

// ForwardFunc forwards to pod until ctx ends (nil) or the connection to the
// pod is lost (an error). It calls ready once its local listeners are up.
type ForwardFunc func(ctx context.Context, pod *corev1.Pod, ready func()) error

// ForwardOptions say how PortForward waits and reports.
type ForwardOptions struct {
	// PodRunningTimeout is how long to wait for a running, ready pod, at
	// the start and after the pod forwarded to went away.
	PodRunningTimeout time.Duration
	// Moved is told when forwarding moves from pod from to pod to: from
	// was deleted, began terminating, stopped being ready or lost its
	// connection.
	Moved func(from, to *corev1.Pod, why string)
	// Retry is the pause before forwarding again to the same pod after a
	// lost connection (default 1s), so that a pod that keeps refusing is
	// not hammered.
	Retry time.Duration
}

// usable reports whether a port-forward may go to p: running, ready and
// not terminating.
func usable(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// PortForward runs forward against the newest running, ready pod owned by
// the workload object uid of id (found by ownership, watched rather than
// polled) and keeps it going: when that pod is deleted, starts terminating
// or stops being ready, or the connection to it is lost, forwarding moves to
// the newest usable pod, waiting up to o.PodRunningTimeout for one. It
// returns nil when ctx ends, ErrNoPod when no usable pod came in time, and
// forward's error when the first forward to a pod fails before it was ready
// (the server refused it: that would fail again).
func (r *Runtime) PortForward(ctx context.Context, id runtimeid.ID, uid string, o ForwardOptions, forward ForwardFunc) error {
	if o.Retry <= 0 {
		o.Retry = time.Second
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watch, err := r.WatchOwnedPods(ctx, id, uid)
	if err != nil {
		return err
	}
	pods := map[types.UID]*corev1.Pod{}
	apply := func(c PodChange) {
		if c.Deleted {
			delete(pods, c.Pod.UID)
		} else {
			pods[c.Pod.UID] = c.Pod
		}
	}
	newest := func() *corev1.Pod {
		var best *corev1.Pod
		for _, p := range pods {
			if usable(p) && (best == nil || newer(p, best)) {
				best = p
			}
		}
		return best
	}
	// await returns the newest usable pod, waiting for the watch.
	await := func(after *corev1.Pod) (*corev1.Pod, error) {
		timer := time.NewTimer(o.PodRunningTimeout)
		defer timer.Stop()
		synced := watch.Synced
		for {
			if synced == nil {
				if p := newest(); p != nil {
					return p, nil
				}
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-synced:
				synced = nil
			case c := <-watch.Changes:
				apply(c)
			case <-timer.C:
				if after != nil {
					return nil, fmt.Errorf("%w: %s has no running, ready pod %s after pod %s went away: check 'kubectl gobrave inspect %s'", ErrNoPod, id, o.PodRunningTimeout, after.Name, id)
				}
				return nil, fmt.Errorf("%w: %s has no running, ready pod after %s (raise --pod-running-timeout to wait longer): check 'kubectl gobrave inspect %s'", ErrNoPod, id, o.PodRunningTimeout, id)
			}
		}
	}
	// Drain the first sync so that await sees every pod there now.
	pod, err := await(nil)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	for {
		fctx, fcancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		readyCh := make(chan struct{})
		var (
			readyOnce bool
			once      sync.Once
			rc        = readyCh
			target    = pod
		)
		go func() {
			done <- forward(fctx, target, func() { once.Do(func() { close(rc) }) })
		}()
		var why string
		for why == "" {
			select {
			case <-ctx.Done():
				fcancel()
				<-done
				return nil
			case <-readyCh:
				readyOnce = true
				readyCh = nil
			case c := <-watch.Changes:
				apply(c)
				if c.Pod.UID != pod.UID {
					continue
				}
				switch {
				case c.Deleted:
					why = "was deleted"
				case c.Pod.DeletionTimestamp != nil:
					why = "is terminating"
				case !usable(c.Pod):
					why = "is no longer running and ready"
				}
			case err := <-done:
				fcancel()
				if ctx.Err() != nil {
					return nil
				}
				if !readyOnce {
					select {
					case <-readyCh:
						readyOnce = true
					default:
					}
				}
				if !readyOnce {
					return fmt.Errorf("port-forward to %s (pod %s): %w", id, pod.Name, err)
				}
				if err == nil {
					err = errors.New("the forward ended")
				}
				why = "lost its connection (" + err.Error() + ")"
				done = nil
				// Do not hammer a pod that keeps dropping us.
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(o.Retry):
				}
			}
		}
		fcancel()
		if done != nil {
			<-done
		}
		from := pod
		pod, err = await(from)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if o.Moved != nil {
			o.Moved(from, pod, why)
		}
	}
}
