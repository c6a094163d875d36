package monitor

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/gobrave/kubectl-gobrave/pkg/runtime"
	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
)

// The informers that find why a workload's pod does not run: one pod
// informer per informer scope, plus one ReplicaSet informer where
// deployments are watched (a deployment owns its pods through them). Both
// are label-filtered like the workload informers and slimmed hard
// (runtime.SlimPod, runtime.SlimReplicaSet): a list and a watch each,
// whatever the number of workloads.
const (
	kindPod        = "pod"
	kindReplicaSet = "replicaset"
	// byWorkload indexes pods and ReplicaSets by namespace/gobrave-workload.
	byWorkload = "gobrave-workload"
)

// podCache is what the pod status of one informer scope reads. Guarded by
// Monitor.mu (the indexers themselves are safe for concurrent use).
type podCache struct {
	pods, replicaSets cache.Indexer // nil until started
	podsSynced        func() bool   // the pod informer's HasSynced
	// off: pods (or ReplicaSets) cannot be listed or watched there (RBAC):
	// waits then end only with the workload's own status.
	off bool
}

func workloadIndex(obj any) ([]string, error) {
	meta, err := metaOf(obj)
	if err != nil || meta == nil {
		return nil, err
	}
	name, ok := meta.GetLabels()[WorkloadLabel]
	if !ok {
		return nil, nil
	}
	return []string{meta.GetNamespace() + "/" + name}, nil
}

func metaOf(obj any) (metav1.Object, error) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	meta, ok := obj.(metav1.Object)
	if !ok {
		return nil, nil
	}
	return meta, nil
}

// podInformersFor starts, in factory f of scope fns, the pod informer and
// (for deployments) the ReplicaSet informer, unless they run already. Each
// is started alone, with its own stop, before the kind's informer.
// Called by the control loop only.
func (m *Monitor) podInformersFor(ctx context.Context, f informers.SharedInformerFactory, fns, kind string) error {
	aux := []string{kindPod}
	if kind == runtimeid.KindDeployment {
		aux = append(aux, kindReplicaSet)
	}
	for _, a := range aux {
		if m.informers[fns+"|"+a] != nil {
			continue
		}
		if fns != "" && m.informers["|"+a] != nil && !m.podCacheOff("") {
			continue // the cluster-wide one serves this namespace too
		}
		si := informerOf(f, a, fns)
		if err := si.AddIndexers(cache.Indexers{byWorkload: workloadIndex}); err != nil {
			return err
		}
		infCtx, stop := context.WithCancel(ctx)
		inf := &informer{namespace: fns, kind: a, inf: si, stop: stop, aux: true}
		reg, err := si.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { inf.touch(); m.onPod(obj) },
			UpdateFunc: func(_, obj any) { inf.touch(); m.onPod(obj) },
			DeleteFunc: func(obj any) { inf.touch(); m.onPod(obj) },
		})
		if err != nil {
			stop()
			return err
		}
		inf.reg = reg
		if err := si.SetTransform(inf.transform); err != nil {
			return err
		}
		denied, err := m.watchErrors(si, inf)
		if err != nil {
			return err
		}
		m.informers[fns+"|"+a] = inf
		m.mu.Lock()
		pc := m.podCaches[fns]
		if pc == nil {
			pc = &podCache{}
			m.podCaches[fns] = pc
		}
		if a == kindPod {
			pc.pods, pc.podsSynced = si.GetIndexer(), si.HasSynced
		} else {
			pc.replicaSets = si.GetIndexer()
		}
		m.mu.Unlock()
		f.Start(infCtx.Done())

		m.bg.Add(1)
		go func() {
			defer m.bg.Done()
			err := m.waitSynced(ctx, inf, denied)
			select {
			case m.syncCh <- syncResult{inf: inf, err: err}:
			case <-ctx.Done():
			}
		}()
	}
	return nil
}

// podSynced is the end of a pod or ReplicaSet informer's initial sync. One
// that cannot sync (pods not readable) is stopped, and the workloads of its
// scope go without pod status; then every subscription it serves is checked
// in the caches. Called by the control loop only.
func (m *Monitor) podSynced(ctx context.Context, r syncResult) error {
	r.inf.synced = true
	var items []item
	now := time.Now()
	m.mu.Lock()
	if r.err != nil {
		r.inf.stop()
		if pc := m.podCaches[r.inf.namespace]; pc != nil {
			pc.off = true
		}
		if r.inf.namespace == "" {
			m.mu.Unlock()
			// Refused cluster-wide: one per namespace where the workload
			// informers are per namespace (narrowed) instead.
			for ik, inf := range m.informers {
				if inf.namespace != "" && !inf.aux {
					if err := m.podInformersFor(ctx, m.factories[inf.namespace], inf.namespace, inf.kind); err != nil {
						return fmt.Errorf("monitor: set up the pod informers (%s): %w", ik, err)
					}
				}
			}
			return nil
		}
	} else {
		for s := range m.subs.all() {
			if ns, _, _ := s.parts(); s.has(flagWatched) && (r.inf.namespace == "" || r.inf.namespace == ns) {
				items = append(items, m.podObserveLocked(s, now)...)
			}
		}
	}
	m.mu.Unlock()
	m.enqueue(items...)
	return nil
}

// podCacheOff reports whether the pod cache of scope fns was turned off.
func (m *Monitor) podCacheOff(fns string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	pc := m.podCaches[fns]
	return pc != nil && pc.off
}

// isDenied reports whether a list or watch error is RBAC's refusal.
func isDenied(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)
}

// onPod is the handler of the pod and ReplicaSet informers: the pod status
// of the workloads of that name is computed again from the caches.
func (m *Monitor) onPod(obj any) {
	meta, _ := metaOf(obj)
	if meta == nil {
		return
	}
	name, ok := meta.GetLabels()[WorkloadLabel]
	if !ok {
		return
	}
	now := time.Now()
	var items []item
	m.mu.Lock()
	for _, kind := range runtimeid.Kinds {
		m.watchedLocked(meta.GetNamespace(), kind, name, func(sub *subscription) {
			items = append(items, m.podObserveLocked(sub, now)...)
		})
	}
	m.mu.Unlock()
	m.enqueueWait(items...)
}

// podObserveLocked turns the status of the newest pod of sub's object into
// a ContainerWaiting item, unless it repeats the last one. A pod that shows
// nothing wrong reports nothing: the workload's own status says when it runs.
func (m *Monitor) podObserveLocked(sub *subscription, at time.Time) []item {
	st, ok := m.podStatusLocked(sub)
	if !ok {
		return nil
	}
	o, ok := st.Observation(sub.uid)
	if !ok {
		sub.setPodLast(0)
		return nil
	}
	h := hashOf(o)
	if h == sub.podLast() {
		return nil
	}
	sub.setPodLast(h)
	return []item{{ids: []string{sub.id}, obs: o, at: at}}
}

// podCacheLocked is the pod cache serving namespace ns.
func (m *Monitor) podCacheLocked(ns string) *podCache {
	if pc := m.podCaches[ns]; pc != nil && pc.pods != nil {
		return pc
	}
	return m.podCaches[""]
}

// podsLocked returns the cached pods owned by sub's object (by UID: its
// Job's, or its Deployment's ReplicaSets'); false when the caches cannot say.
func (m *Monitor) podsLocked(sub *subscription) ([]*corev1.Pod, bool) {
	if sub.uid == "" {
		return nil, false
	}
	ns, kind, name := sub.parts()
	pc := m.podCacheLocked(ns)
	if pc == nil || pc.off || pc.pods == nil {
		return nil, false
	}
	key := ns + "/" + name
	var rss []*appsv1.ReplicaSet
	if kind == runtimeid.KindDeployment {
		rpc := pc
		if rpc.replicaSets == nil {
			rpc = m.podCaches[""]
		}
		if rpc == nil || rpc.replicaSets == nil || rpc.off {
			return nil, false
		}
		objs, err := rpc.replicaSets.ByIndex(byWorkload, key)
		if err != nil {
			return nil, false
		}
		for _, o := range objs {
			if rs, ok := o.(*appsv1.ReplicaSet); ok {
				rss = append(rss, rs)
			}
		}
	}
	owners := runtime.PodOwners(kind, types.UID(sub.uid), rss)
	objs, err := pc.pods.ByIndex(byWorkload, key)
	if err != nil {
		return nil, false
	}
	var pods []*corev1.Pod
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			if ref := metav1.GetControllerOf(p); ref != nil && owners[ref.UID] {
				pods = append(pods, p)
			}
		}
	}
	return pods, true
}

// podStatusLocked is the status of the newest pod of sub's object.
func (m *Monitor) podStatusLocked(sub *subscription) (runtime.PodStatus, bool) {
	pods, ok := m.podsLocked(sub)
	if !ok {
		return runtime.PodStatus{}, false
	}
	all := map[types.UID]bool{}
	for _, p := range pods {
		if ref := metav1.GetControllerOf(p); ref != nil {
			all[ref.UID] = true
		}
	}
	return runtime.PodStatusOf(runtime.NewestOwned(pods, all)), true
}
