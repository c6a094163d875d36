package monitor

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/informers"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/gobrave/kubectl-gobrave/pkg/runtime"
	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
)

// syncResult reports the end of an informer's initial sync.
type syncResult struct {
	inf *informer
	err error
}

// informerFor returns the informer of kind for namespace, creating and
// starting it (and its factory) the first time. Its initial sync is awaited
// in the background and reported on m.syncCh. Called by the control loop only.
func (m *Monitor) informerFor(ctx context.Context, namespace, kind string) (*informer, error) {
	fns := m.scope(namespace, kind)
	ik := fns + "|" + kind
	if inf := m.informers[ik]; inf != nil {
		return inf, nil
	}
	f := m.factories[fns]
	if f == nil {
		opts := []informers.SharedInformerOption{
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = WorkloadLabel }),
			informers.WithTransform(compact),
		}
		if fns != "" {
			opts = append(opts, informers.WithNamespace(fns))
		}
		f = informers.NewSharedInformerFactoryWithOptions(m.client, 0, opts...)
		m.factories[fns] = f
	}
	if _, err := runtime.KindOf(kind); err != nil {
		return nil, fmt.Errorf("monitor: %w", err)
	}
	if err := m.podInformersFor(ctx, f, fns, kind); err != nil {
		return nil, fmt.Errorf("monitor: set up the pod informers: %w", err)
	}
	// Not a shared informer: a reflector (cache.Controller) fills the
	// Monitor's own store (wstore), which keeps per object its UID and
	// observation, and reports each change itself. The objects of the
	// initial list are not mapped as they arrive: every watched
	// subscription the informer serves is checked in the synced store
	// right after (snapshotAll), at the writer's pace.
	infCtx, stop := context.WithCancel(ctx)
	inf := &informer{namespace: fns, kind: kind, stop: stop, shareUID: m.uidFor(kind)}
	inf.ws = newWstore(kind, fns, inf.transform, subsHost{m}, func(obj any, deleted bool) { m.onObject(kind, obj, deleted) })
	denied, onErr := watchErrorHandler(inf, m.watchWarnings(inf))
	lw, typ, err := workloadListWatch(m.client, inf.ws, kind, fns, m.opts.SyncTimeout)
	if err != nil {
		stop()
		return nil, fmt.Errorf("monitor: set up the %s informer: %w", kind, err)
	}
	ctrl := cache.New(&cache.Config{
		Queue:                        inf.ws,
		ListerWatcher:                lw,
		ObjectType:                   typ,
		Process:                      func(any, bool) error { return nil },
		WatchErrorHandlerWithContext: onErr,
	})
	m.informers[ik] = inf
	m.mu.Lock()
	m.wstores[ik] = inf.ws
	m.mu.Unlock()
	m.ctrls.Add(1)
	go func() {
		defer m.ctrls.Done()
		ctrl.RunWithContext(infCtx)
	}()

	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		err := m.waitSynced(ctx, inf, denied)
		select {
		case m.syncCh <- syncResult{inf: inf, err: err}:
		case <-ctx.Done():
		}
	}()
	return inf, nil
}

// informerOf is factory f's informer of kind (pod or replicaset) in
// namespace ns ("" all), label-filtered, with no index: the factory's
// default one, by namespace, is a set of every key (about 90 bytes an
// object) that nothing here reads. They get the byWorkload index
// (podInformersFor). The workload kinds have no shared informer (wstore).
func informerOf(f informers.SharedInformerFactory, kind, ns string) cache.SharedIndexInformer {
	tweak := func(o *metav1.ListOptions) { o.LabelSelector = WorkloadLabel }
	none := cache.Indexers{}
	if kind == kindReplicaSet {
		return f.InformerFor(&appsv1.ReplicaSet{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
			return appsinformers.NewFilteredReplicaSetInformer(c, ns, resync, none, tweak)
		})
	}
	return f.InformerFor(&corev1.Pod{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return coreinformers.NewFilteredPodInformer(c, ns, resync, none, tweak)
	})
}

// scope is the namespace of the informer serving kind in namespace: "" when
// it is cluster-wide.
func (m *Monitor) scope(namespace, kind string) string {
	if m.clusterWide && !m.narrowed[kind] {
		return ""
	}
	return namespace
}

// informerKey is the key in m.informers of the informer serving kind in
// namespace.
func (m *Monitor) informerKey(namespace, kind string) string {
	return m.scope(namespace, kind) + "|" + kind
}

// narrow replaces a cluster-wide informer whose list or watch RBAC refused
// (a user whose roles are bound per namespace) with one informer per
// namespace of the subscriptions of its kind, now and for the IDs added
// later. None of them was checked yet: each is when its namespace's informer
// has synced. A namespace refused as well fails Run with its own error.
// Called by the control loop only.
func (m *Monitor) narrow(ctx context.Context, inf *informer) error {
	inf.stop()
	delete(m.informers, "|"+inf.kind)
	m.narrowed[inf.kind] = true
	m.mu.Lock()
	// Its cache goes (RBAC refused its list: it holds nothing in practice).
	inf.ws.dead = true
	delete(m.wstores, "|"+inf.kind)
	subsHost{m}.eachHostedLocked(inf.kind, "", func(e *wentry, _, _ string) { *e = wentry{} })
	clear(inf.ws.items)
	nss := map[string]bool{}
	for s := range m.subs.all() {
		if ns, kind, _ := s.parts(); s.has(flagWatched) && kind == inf.kind {
			nss[ns] = true
		}
	}
	m.mu.Unlock()
	for _, ns := range slices.Sorted(maps.Keys(nss)) {
		if _, err := m.informerFor(ctx, ns, inf.kind); err != nil {
			return err
		}
	}
	return nil
}

// watchErrors keeps the last list/watch error of si on inf and reports a
// refusal by RBAC on the returned channel: the reflector would retry it for
// ever, and Run must fail fast instead. Other failures are warned about
// (watchWarnings).
func (m *Monitor) watchErrors(si cache.SharedIndexInformer, inf *informer) (<-chan error, error) {
	denied, handler := watchErrorHandler(inf, m.watchWarnings(inf))
	return denied, si.SetWatchErrorHandlerWithContext(handler)
}

// watchWarnings tells Options.Warn, in one line, when inf cannot list or
// watch and retries (runtime.WatchWarnings).
func (m *Monitor) watchWarnings(inf *informer) cache.WatchErrorHandlerWithContext {
	where, _ := whereIn(m.client, inf.namespace)
	return runtime.WatchWarnings(inf.kind+"s "+where, m.opts.Warn)
}

// watchErrorHandler is watchErrors' handler, for a reflector of inf: the
// failures that are neither a stop nor a refusal go to report.
func watchErrorHandler(inf *informer, report cache.WatchErrorHandlerWithContext) (<-chan error, cache.WatchErrorHandlerWithContext) {
	denied := make(chan error, 1)
	return denied, func(ctx context.Context, r *cache.Reflector, err error) {
		if runtime.WatchStopped(ctx, err) {
			// The informer is being stopped (the command was interrupted,
			// or is done): its watch ends with the context, which is no
			// error to report. client-go's default handler would print it
			// ("Failed to watch ... context canceled") above the command's
			// own one-line error.
			return
		}
		inf.setLastErr(err)
		if isDenied(err) {
			select {
			case denied <- err:
			default:
			}
			return
		}
		report(ctx, r, err)
	}
}

// uidFor is the UID a workload informer of kind keeps for the object
// namespace/name: the string of a subscription of that object when its UID
// is the same (read from the record when the ID was registered), else uid.
// Both are 36-byte strings (48 with the allocator's rounding): without
// this, a subscription held the record's copy until its object was
// observed and the cache held the decoder's for as long as the object
// lived, two copies for every workload through the initial list and the
// snapshot that follows it (4.8 MB at 100,000).
func (m *Monitor) uidFor(kind string) func(ns, name, uid string) string {
	return func(ns, name, uid string) string {
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, rt := range m.runtimes {
			if sub := m.lookupLocked(rt, ns, kind, name); sub != nil && sub.uid == uid {
				return sub.uid
			}
		}
		return uid
	}
}

// waitSynced waits for the informer's cache to sync, for as long as its
// initial list makes progress: it fails when no object has arrived for
// Options.SyncTimeout (a progress budget, not a total one: at 100,000
// objects a cluster-wide watch-list on a loaded server takes longer than
// any fixed budget, while a server that stops answering still fails within
// SyncTimeout). When the list has been quiet a moment before that
// (probeBudget) and the reflector has reported no error, one probe list
// runs meanwhile to learn why, so that the error carries the cause and is
// still on time.
func (m *Monitor) waitSynced(ctx context.Context, inf *informer, denied <-chan error) error {
	idle := m.opts.SyncTimeout
	budget := probeBudget(idle)
	inf.touch() // the wait starts as progress
	timer := time.NewTimer(idle - budget)
	defer timer.Stop()
	probed := make(chan error, 1)
	resource := inf.kind + "s"
	where, canI := whereIn(m.client, inf.namespace)
	probing := false
	// The handler's sync, not only the cache's: its initial events have
	// been handled (the workload informers' skipped: snapshotAll, which
	// runs next, observes them from the cache; the pod informers' mapped).
	var synced <-chan struct{}
	switch {
	case inf.ws != nil:
		synced = inf.ws.synced
	case inf.reg != nil:
		synced = inf.reg.HasSyncedChecker().Done()
	default:
		synced = inf.inf.HasSyncedChecker().Done()
	}
	for {
		select {
		case <-synced:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case err := <-denied:
			return fmt.Errorf("%s informer %s: list/watch %s is forbidden: %w: check access with 'kubectl auth can-i list %s %s' and 'kubectl auth can-i watch %s %s'",
				inf.kind, where, resource, err, resource, canI, resource, canI)
		case <-timer.C:
			quiet := inf.quiet()
			switch {
			case quiet < idle-budget:
				timer.Reset(idle - budget - quiet) // objects arrived meanwhile
				continue
			case quiet < idle:
				if !probing && inf.getLastErr() == nil {
					// A watch-list request that fails is retried inside the
					// reflector without reaching the error handler: ask once.
					probing = true
					go func() { probed <- m.probe(ctx, inf, budget) }()
				}
				timer.Reset(idle - quiet)
				continue
			}
			cause := ""
			err := inf.getLastErr()
			if err == nil && probing {
				err = <-probed // bounded by budget, which ends now
			}
			if err != nil {
				cause = fmt.Sprintf(" (last error: %v)", runtime.Brief(err))
			}
			return fmt.Errorf("timed out after %s waiting for the %s informer %s to sync%s: check the connection to the cluster ('kubectl gobrave doctor') and access with 'kubectl auth can-i list %s %s'",
				m.opts.SyncTimeout, inf.kind, where, cause, resource, canI)
		}
	}
}

// probeBudget is the time a probe gets: a quarter of the sync timeout, at
// most 2 s, taken from the end of the quiet time allowed.
func probeBudget(syncTimeout time.Duration) time.Duration {
	return min(syncTimeout/4, 2*time.Second)
}

// probe lists at most one object of inf's kind within budget, to learn why
// its informer does not sync. Only on failure.
func (m *Monitor) probe(ctx context.Context, inf *informer, budget time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	opts := metav1.ListOptions{LabelSelector: WorkloadLabel, Limit: 1}
	var err error
	switch inf.kind {
	case runtimeid.KindDeployment:
		_, err = m.client.AppsV1().Deployments(inf.namespace).List(ctx, opts)
	case runtimeid.KindJob:
		_, err = m.client.BatchV1().Jobs(inf.namespace).List(ctx, opts)
	}
	return err
}

// onObject is every informer handler: it maps the object of a subscription
// to an observation and enqueues it. No network or database I/O.
func (m *Monitor) onObject(kind string, obj any, deleted bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, deleted = t.Obj, true
	}
	ns, name, _, ok := identity(obj)
	if !ok {
		return
	}
	now := time.Now()
	m.mu.Lock()
	var items []item
	m.watchedLocked(ns, kind, name, func(sub *subscription) {
		m.setOutsideLocked(sub, false)
		items = append(items, m.observeLocked(sub, obj, deleted, now)...)
	})
	m.mu.Unlock()
	m.enqueueWait(items...)
}

// observeLocked turns what is known of sub's object into items for the
// writer: a different UID than the subscription's means its object is gone
// (ContainerDeleted for the old UID) and a new one took the name; then the
// object's own observation, unless it repeats the last one.
func (m *Monitor) observeLocked(sub *subscription, obj any, deleted bool, at time.Time) (items []item) {
	_, _, uid, ok := identity(obj)
	if !ok {
		return nil
	}
	add := func(o Observation) {
		sub.setLast(hashOf(o))
		items = append(items, item{ids: []string{sub.id}, obs: o, at: at})
	}
	defer func() {
		if !deleted {
			// The object's UID may be new to sub: its pods' status too.
			items = append(items, m.podObserveLocked(sub, at)...)
		}
	}()
	if uid == sub.uid {
		// The cache's string, not the record's copy: one string kept.
		sub.uid = uid
	}
	if sub.uid != "" && uid != sub.uid {
		if deleted {
			return nil // an older or newer object of the same name went away
		}
		add(Deleted(types.UID(sub.uid)))
		sub.uid = uid
	}
	firstUID := sub.uid == ""
	if firstUID {
		sub.uid = uid
	}
	var o Observation
	if deleted {
		o, ok = Deleted(types.UID(uid)), true
	} else {
		o, ok = observe(obj)
	}
	switch {
	case ok && hashOf(o) != sub.last():
		add(o) // carries the UID to the store
	case firstUID && uid != "":
		items = append(items, item{ids: []string{sub.id}, setUID: uid, at: at})
	}
	return items
}

// goneLocked is the observation of sub's object not found.
func (m *Monitor) goneLocked(sub *subscription, at time.Time) []item {
	o := Deleted(types.UID(sub.uid))
	h := hashOf(o)
	if h == sub.last() {
		return nil
	}
	sub.setLast(h)
	return []item{{ids: []string{sub.id}, obs: o, at: at}}
}

// snapshotAll checks, once, every subscription the informer serves, in
// the background (m.bg): at the writer's pace (enqueueWait), so that the
// observations of an initial sync of 100,000 objects never wait in memory
// all at once, and without holding up the control loop (heartbeats) while
// the writer records them. The objects it finds missing are confirmed
// after the pass (m.passes), one list per namespace for all of them.
func (m *Monitor) snapshotAll(ctx context.Context, inf *informer) {
	m.mu.Lock()
	var subs []*subscription
	for s := range m.subs.all() {
		if ns, kind, _ := s.parts(); s.has(flagWatched) && !s.has(flagSnapshotted) && kind == inf.kind && (inf.namespace == "" || inf.namespace == ns) {
			subs = append(subs, s)
		}
	}
	if len(subs) == 0 {
		m.mu.Unlock()
		return
	}
	m.passes++
	m.mu.Unlock()
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		defer func() {
			m.mu.Lock()
			m.passes--
			m.mu.Unlock()
			signal(m.wake) // confirmMissing may go on
		}()
		for _, s := range subs {
			if ctx.Err() != nil {
				return
			}
			m.snapshotWith(inf, s, m.enqueueWait)
		}
	}()
}

// snapshot checks sub's object in the synced cache, so that what happened
// before the subscription is not missed. An object missing from the cache is
// confirmed by the next list of its namespace (confirmMissing), shared by
// every object missing there.
func (m *Monitor) snapshot(_ context.Context, inf *informer, sub *subscription) {
	m.snapshotWith(inf, sub, m.enqueue)
}

// snapshotWith is snapshot, handing the items to enqueue.
func (m *Monitor) snapshotWith(inf *informer, sub *subscription, enqueue func(...item)) {
	ns, _, name := sub.parts()
	obj, exists := inf.ws.get(ns, name)
	now := time.Now()
	m.mu.Lock()
	if m.subs.get(sub.id) != sub || !sub.has(flagWatched) || sub.has(flagSnapshotted) {
		m.mu.Unlock()
		return
	}
	sub.set(flagSnapshotted, true)
	if exists {
		items := m.observeLocked(sub, obj, false, now)
		m.mu.Unlock()
		enqueue(items...)
		return
	}
	m.missLocked(sub)
	m.mu.Unlock()
	signal(m.wake)
}

// missing is a subscription whose object the label-filtered cache does not
// hold, with its UID then.
type missing struct {
	sub *subscription
	uid string
}

// missLocked queues sub for confirmMissing.
func (m *Monitor) missLocked(sub *subscription) {
	m.inflight++
	m.missing = append(m.missing, missing{sub: sub, uid: sub.uid})
}

// confirmMissing lists, in the background, the namespaces of the queued
// subscriptions whose objects the informers do not hold: one watch-list
// (or paginated list) per namespace and kind (no label selector: an object whose
// gobrave-workload label was removed is found), whatever the number of
// objects missing there. Called by the control loop only. While a
// snapshotAll pass runs it waits: the pass queues its misses one by one,
// and a list taken halfway would leave the rest of the namespace to a
// second one.
func (m *Monitor) confirmMissing(ctx context.Context) {
	m.mu.Lock()
	if m.passes > 0 {
		m.mu.Unlock()
		return
	}
	queued := m.missing
	m.missing = nil
	m.mu.Unlock()
	groups := map[string][]missing{}
	var keys []string
	for _, ms := range queued {
		ns, kind, _ := ms.sub.parts()
		k := kind + "|" + ns
		if groups[k] == nil {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], ms)
	}
	for _, k := range keys {
		g := groups[k]
		ns, kind, _ := g[0].sub.parts()
		m.bg.Add(1)
		go m.confirm(ctx, kind, ns, g)
	}
}

// confirm lists kind in ns once and settles each of group: an object not
// there records ContainerDeleted, one found is observed (its label was
// removed: it is checked again at each heartbeat; another UID than the
// recorded one is that object gone). Transient errors are retried; any
// other outcome records nothing.
func (m *Monitor) confirm(ctx context.Context, kind, ns string, group []missing) {
	defer m.bg.Done()
	defer func() {
		m.mu.Lock()
		m.inflight -= len(group)
		m.mu.Unlock()
		signal(m.wake)
	}()
	select {
	case m.sem <- struct{}{}:
		defer func() { <-m.sem }()
	case <-ctx.Done():
		return
	}
	want := make(map[string]bool, len(group))
	for _, ms := range group {
		_, _, name := ms.sub.parts()
		want[name] = true
	}
	var found map[string]any
	l, err := listerFor(m.client, kind, ns)
	if err == nil {
		err = retry.OnError(m.getBackoff, func(err error) bool { return ctx.Err() == nil && retriable(err) }, func() error {
			found = map[string]any{}
			return stream(ctx, m.client, l, "", m.opts.SyncTimeout, func(obj any) error {
				if o, ok := obj.(metav1.Object); ok && want[o.GetName()] {
					found[o.GetName()], _ = slim(obj)
				}
				return nil
			})
		})
	}
	if apierrors.IsNotFound(err) {
		err, found = nil, nil // the namespace is gone
	}
	if err != nil {
		return
	}
	now := time.Now()
	var items []item
	m.mu.Lock()
	for _, ms := range group {
		sub := ms.sub
		if m.subs.get(sub.id) != sub || !sub.has(flagWatched) {
			continue
		}
		_, _, name := sub.parts()
		if obj, ok := found[name]; ok {
			m.setOutsideLocked(sub, true)
			items = append(items, m.observeLocked(sub, obj, false, now)...)
			continue
		}
		if sub.uid == ms.uid {
			// Unless the informer saw an object of that name meanwhile.
			items = append(items, m.goneLocked(sub, now)...)
		}
	}
	m.mu.Unlock()
	m.enqueue(items...)
}

// recheckOutside lists again the namespaces of the objects the informers
// cannot see (their label was removed), so that their end is not missed:
// one list per namespace and kind per heartbeat, and only where there are
// such objects.
func (m *Monitor) recheckOutside() {
	m.mu.Lock()
	if m.nOutside == 0 {
		m.mu.Unlock()
		return
	}
	n := 0
	for s := range m.subs.all() {
		if s.has(flagOutside) {
			m.missLocked(s)
			n++
		}
	}
	m.mu.Unlock()
	if n > 0 {
		signal(m.wake)
	}
}

// transient reports whether err from the API server is worth retrying:
// timeouts, throttling (429), server errors (5xx) and broken connections.
// A transient error never becomes ContainerFailed or ContainerDeleted.
func transient(err error) bool {
	if err == nil {
		return false
	}
	switch {
	case apierrors.IsServerTimeout(err), apierrors.IsTimeout(err), apierrors.IsTooManyRequests(err),
		apierrors.IsInternalError(err), apierrors.IsServiceUnavailable(err), apierrors.IsUnexpectedServerError(err):
		return true
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Code >= 500 {
		return true
	}
	if utilnet.IsConnectionReset(err) || utilnet.IsConnectionRefused(err) || utilnet.IsProbableEOF(err) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
