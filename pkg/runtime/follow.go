package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
)

// podSelector is the label selector that narrows the pods (and, for a
// deployment, the ReplicaSets) of the object uid of id; ownership decides.
func podSelector(id runtimeid.ID, uid string) string {
	if id.Kind == runtimeid.KindJob {
		return batchv1.ControllerUidLabel + "=" + uid
	}
	return Selector(id.Name)
}

// OwnedPods watches the pods owned by the workload object uid of id (see
// NewestPod for what owned means) with one watch on pods and, for a
// deployment, one on its ReplicaSets, both narrowed by label; no polling.
// Each change of an owned pod, and each pod's deletion (deleted set), is
// sent on the returned channel. The first batch is the pods that exist,
// then Synced is closed. Watching ends with ctx.
type OwnedPods struct {
	Changes <-chan PodChange
	// Synced is closed once the pods that existed when watching began have
	// all been sent.
	Synced <-chan struct{}
	// Workload receives a value (without blocking the watch: changes may
	// be merged) when the workload object itself changes or is deleted,
	// e.g. a Job completes.
	Workload <-chan struct{}
}

// PodChange is a pod as it is now; Deleted means it is gone.
type PodChange struct {
	Pod     *corev1.Pod
	Deleted bool
}

// WatchOwnedPods starts an OwnedPods watch. An empty uid means the object
// that has the name now; ErrNoPod when there is none.
func (r *Runtime) WatchOwnedPods(ctx context.Context, id runtimeid.ID, uid string) (OwnedPods, error) {
	if uid == "" {
		got, exists, err := r.Exists(ctx, id)
		if err != nil {
			return OwnedPods{}, fmt.Errorf("find the pods of %s: %w", id, err)
		}
		if !exists {
			return OwnedPods{}, fmt.Errorf("%w: %s no longer exists in the cluster, so it has no pods: check 'kubectl gobrave inspect %s'", ErrNoPod, id, id)
		}
		uid = got
	}
	factory := informers.NewSharedInformerFactoryWithOptions(r.Client, 0,
		informers.WithNamespace(id.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = podSelector(id, uid) }))
	podInf := factory.Core().V1().Pods().Informer()
	var rsInf cache.SharedIndexInformer
	if id.Kind == runtimeid.KindDeployment {
		rsInf = factory.Apps().V1().ReplicaSets().Informer()
	}
	// The workload object itself, by name, in a watch of its own.
	objFactory := informers.NewSharedInformerFactoryWithOptions(r.Client, 0,
		informers.WithNamespace(id.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "metadata.name=" + id.Name }))
	var objInf cache.SharedIndexInformer
	if id.Kind == runtimeid.KindJob {
		objInf = objFactory.Batch().V1().Jobs().Informer()
	} else {
		objInf = objFactory.Apps().V1().Deployments().Informer()
	}
	workload := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case workload <- struct{}{}:
		default:
		}
	}
	if _, err := objInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { poke(obj) },
		DeleteFunc: poke,
	}); err != nil {
		return OwnedPods{}, err
	}
	changes := make(chan PodChange, 64)
	synced := make(chan struct{})
	var (
		mu      sync.Mutex
		pending = map[types.UID]*corev1.Pod{} // pods whose ReplicaSet was not seen yet
	)
	owned := func(p *corev1.Pod) (yes, unknown bool) {
		ref := metav1.GetControllerOf(p)
		if ref == nil {
			return false, false
		}
		if id.Kind == runtimeid.KindJob {
			return ref.UID == types.UID(uid), false
		}
		for _, obj := range rsInf.GetStore().List() {
			if rs, ok := obj.(*appsv1.ReplicaSet); ok && rs.UID == ref.UID {
				rsRef := metav1.GetControllerOf(rs)
				return rsRef != nil && rsRef.UID == types.UID(uid), false
			}
		}
		return false, true
	}
	send := func(c PodChange) {
		select {
		case changes <- c:
		case <-ctx.Done():
		}
	}
	onPod := func(obj any, deleted bool) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj, deleted = d.Obj, true
		}
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		yes, unknown := owned(p)
		if unknown && !deleted {
			mu.Lock()
			pending[p.UID] = p
			mu.Unlock()
			return
		}
		if deleted {
			mu.Lock()
			delete(pending, p.UID)
			mu.Unlock()
		}
		if yes {
			send(PodChange{Pod: p, Deleted: deleted})
		}
	}
	if _, err := podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { onPod(obj, false) },
		UpdateFunc: func(_, obj any) { onPod(obj, false) },
		DeleteFunc: func(obj any) { onPod(obj, true) },
	}); err != nil {
		return OwnedPods{}, err
	}
	if rsInf != nil {
		// A pod seen before its ReplicaSet is decided when the ReplicaSet
		// arrives.
		if _, err := rsInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(any) {
				mu.Lock()
				retry := pending
				pending = map[types.UID]*corev1.Pod{}
				mu.Unlock()
				for _, p := range retry {
					onPod(p, false)
				}
			},
		}); err != nil {
			return OwnedPods{}, err
		}
	}
	// Not started yet, so setting the handlers cannot fail.
	at := ServerAt(r.Client)
	for _, w := range []struct {
		inf  cache.SharedIndexInformer
		what string
	}{
		{podInf, "the pods of " + id.String()},
		{rsInf, "the ReplicaSets of " + id.String()},
		{objInf, id.String()},
	} {
		if w.inf != nil {
			_ = w.inf.SetWatchErrorHandlerWithContext(WatchWarnings(w.what+at, r.Warn))
		}
	}
	factory.Start(ctx.Done())
	objFactory.Start(ctx.Done())
	go func() {
		defer objFactory.Shutdown()
		defer factory.Shutdown()
		if cache.WaitForCacheSync(ctx.Done(), podInf.HasSynced) && (rsInf == nil || cache.WaitForCacheSync(ctx.Done(), rsInf.HasSynced)) {
			close(synced)
		}
		<-ctx.Done()
	}()
	return OwnedPods{Changes: changes, Synced: synced, Workload: workload}, nil
}

// instanceKey names one container instance of a pod: its UID and the
// restart count, so that a container restarted in place is a new stream.
func instanceKey(p *corev1.Pod) (string, bool) {
	if len(p.Status.ContainerStatuses) == 0 {
		return "", false
	}
	cs := p.Status.ContainerStatuses[0]
	if cs.State.Running == nil && cs.State.Terminated == nil {
		return "", false // no log yet
	}
	return string(p.UID) + "/" + strconv.Itoa(int(cs.RestartCount)), true
}

// FollowLogs streams the log of the workload's newest pod (o's tail, since
// and timestamps apply) and then, with o.Follow, the whole log of every
// container instance of its pods that starts later: a pod that replaces
// another (a restart, a rollout, a job's retry) or a container restarted in
// place. Each stream gets a writer of its own from open, closed when the
// stream ends. Without o.Follow, or with o.Previous, it is Logs. With o.Follow it ends when ctx
// does, or once every stream has ended and the workload is gone or is a
// finished Job; a stream that fails while following (its pod went away
// under it) is passed to warn and following goes on.
func (r *Runtime) FollowLogs(ctx context.Context, id runtimeid.ID, uid string, o LogOptions, open func(pod string) io.WriteCloser, warn func(error)) error {
	// The previous instance's log is complete: there is nothing to follow.
	if !o.Follow || o.Previous {
		pod, err := r.NewestPod(ctx, id, uid, false)
		if err != nil {
			return err
		}
		w := open(pod.Name)
		err = r.streamPod(ctx, id, pod, o, w)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		return err
	}
	// A workload without any pod (stopped, or not started) is an error
	// as it is without o.Follow, rather than a wait without end.
	if _, err := r.NewestPod(ctx, id, uid, false); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if uid == "" {
		got, exists, err := r.Exists(ctx, id)
		if err != nil {
			return fmt.Errorf("find the pods of %s: %w", id, err)
		}
		if !exists {
			return fmt.Errorf("%w: %s no longer exists in the cluster, so it has no pods: check 'kubectl gobrave inspect %s'", ErrNoPod, id, id)
		}
		uid = got
	}
	watch, err := r.WatchOwnedPods(ctx, id, uid)
	if err != nil {
		return err
	}
	type stream struct {
		cancel context.CancelFunc
		pod    types.UID
	}
	var (
		active  = map[string]stream{} // instance key -> its stream
		seen    = map[string]bool{}
		ended   = make(chan string, 16)
		errs    = make(chan error, 16)
		wg      sync.WaitGroup
		synced  = watch.Synced
		initial []*corev1.Pod // pods that existed when watching began
		first   = true        // the first stream gets o's tail and since
	)
	defer wg.Wait()
	defer cancel()
	start := func(p *corev1.Pod, key string) {
		seen[key] = true
		opts := LogOptions{Tail: -1, Follow: true, Timestamps: o.Timestamps}
		if first {
			opts.Tail, opts.Since = o.Tail, o.Since
			first = false
		}
		// A newer instance of the same pod replaces the older one.
		for k, s := range active {
			if s.pod == p.UID {
				s.cancel()
				delete(active, k)
			}
		}
		sctx, scancel := context.WithCancel(ctx)
		active[key] = stream{cancel: scancel, pod: p.UID}
		w := open(p.Name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := r.streamPod(sctx, id, p, opts, w)
			_ = w.Close()
			if err != nil && sctx.Err() == nil {
				select {
				case errs <- err:
				default:
				}
			}
			select {
			case ended <- key:
			case <-ctx.Done():
			}
		}()
	}
	consider := func(p *corev1.Pod) {
		if key, ok := instanceKey(p); ok && !seen[key] {
			start(p, key)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errs:
			warn(err)
		case <-synced:
			synced = nil
			// Of the pods there now, only the newest is read (with o's
			// tail); the older ones of a rollout are left alone.
			var newest *corev1.Pod
			for _, p := range initial {
				if newest == nil || newer(p, newest) {
					newest = p
				}
			}
			for _, p := range initial {
				if p == newest {
					continue
				}
				if key, ok := instanceKey(p); ok {
					seen[key] = true
				}
			}
			if newest != nil {
				consider(newest)
			}
			initial = nil
		case c := <-watch.Changes:
			if c.Deleted {
				if synced != nil {
					initial = slices.DeleteFunc(initial, func(p *corev1.Pod) bool { return p.UID == c.Pod.UID })
					continue
				}
				for k, s := range active {
					if s.pod == c.Pod.UID {
						s.cancel()
						delete(active, k)
					}
				}
				continue
			}
			if synced != nil {
				initial = replacePod(initial, c.Pod)
				continue
			}
			consider(c.Pod)
		case key := <-ended:
			delete(active, key)
			if len(active) > 0 {
				continue
			}
			done, err := r.finished(ctx, id, uid)
			if err != nil && ctx.Err() == nil {
				return err
			}
			if done {
				return nil
			}
		case <-watch.Workload:
			// A Job that completes after its last stream ended.
			if synced != nil || len(active) > 0 {
				continue
			}
			done, err := r.finished(ctx, id, uid)
			if err != nil && ctx.Err() == nil {
				return err
			}
			if done {
				return nil
			}
		}
	}
}

// replacePod puts p into pods in place of an earlier copy of it.
func replacePod(pods []*corev1.Pod, p *corev1.Pod) []*corev1.Pod {
	for i := range pods {
		if pods[i].UID == p.UID {
			pods[i] = p
			return pods
		}
	}
	return append(pods, p)
}

// finished reports whether following the object uid of id can end: it is
// gone (or replaced by another object of the name), or it is a Job that
// has completed or failed.
func (r *Runtime) finished(ctx context.Context, id runtimeid.ID, uid string) (bool, error) {
	if id.Kind != runtimeid.KindJob {
		live, exists, err := r.Exists(ctx, id)
		return !exists || live != uid, err
	}
	job, err := r.Client.BatchV1().Jobs(id.Namespace).Get(ctx, id.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if string(job.UID) != uid {
		return true, nil
	}
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true, nil
		}
	}
	return false, nil
}

// streamPod copies the log of pod's first container to w.
func (r *Runtime) streamPod(ctx context.Context, id runtimeid.ID, pod *corev1.Pod, o LogOptions, w io.Writer) error {
	opts := o.podLogOptions(id, pod)
	stream, err := r.Client.CoreV1().Pods(id.Namespace).GetLogs(pod.Name, opts).Stream(ctx)
	if err != nil {
		return fmt.Errorf("logs of %s (pod %s): %w", id, pod.Name, err)
	}
	defer stream.Close()
	if _, err := io.Copy(w, stream); err != nil && ctx.Err() == nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("logs of %s (pod %s): %w", id, pod.Name, err)
	}
	return nil
}
