package monitor

import (
	"context"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"

	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
)

// wentry is what a workload informer keeps of one object: its UID and its
// observation, encoded as compacted encodes it. Its namespace and name are
// in its key; no resource version (the reflector tracks its own). 48
// bytes and the UID string, which the object's subscription shares. The
// entry of an object with a subscription is a field of the subscription
// (hosted): one struct per ID instead of two and a map entry each.
type wentry struct {
	uid               string
	text              *obsText
	started, finished int64
	exitCode          int32
	typ, flags        uint8
	gen               uint8 // the Replace that last stored it (wstore.Replace)
	hosted            bool  // a subscription's field, held for the wstore serving its object
}

// entryOf is the entry of c.
func entryOf(c *compacted) wentry {
	return wentry{uid: c.uid, text: c.text, started: c.started, finished: c.finished, exitCode: c.exitCode, typ: c.typ, flags: c.flags}
}

// view is e as the handlers and snapshots read an object (a compacted).
func (e *wentry) view(ns, name string) *compacted {
	return &compacted{name: name, namespace: ns, uid: e.uid, text: e.text, started: e.started, finished: e.finished,
		exitCode: e.exitCode, typ: e.typ, flags: e.flags}
}

// entryHost keeps the entries of the objects that have a subscription, in
// the subscriptions themselves (Monitor: subsHost). Its lock is the
// wstore's: what it hosts and the wstore's own maps change together.
type entryHost interface {
	sync.Locker
	// hostLocked is the entry of the object kind ns/name a subscription
	// hosts; with adopt, when none does, the entry of a subscription of
	// that object, hosted from now on; nil when the object has none.
	hostLocked(kind, ns, name string, adopt bool) *wentry
	// eachHostedLocked calls fn with each hosted entry of kind in
	// namespace ns ("" every namespace).
	eachHostedLocked(kind, ns string, fn func(e *wentry, ns, name string))
}

// wstore is the cache of a workload informer (one kind in one scope) and
// its event source: the store a cache.Reflector fills (through
// cache.Controller, which owns the reflector's retries, relists after an
// expired watch and error handler), in place of a shared informer's
// DeltaFIFO, indexer and notification buffers. It keeps one wentry per
// object: in the object's subscription when it has one (the host's), else
// in a map of its own keyed "namespace|kind|name".
//
// After the first Replace (the initial list) has filled it, each Add,
// Update and Delete calls onEvent; a later Replace (a relist: the watch
// expired, or broke) calls onEvent for every object listed and, deleted,
// for every object held that the list no longer has (gone while the watch
// was down). Every call is on the reflector's goroutine, never under mu.
type wstore struct {
	kind      string
	namespace string // "" all
	transform cache.TransformFunc
	host      entryHost // nil: every entry in items
	onEvent   func(obj any, deleted bool)

	// mu is the host's lock (with a host), else the store's own.
	mu    sync.Locker
	items map[string]*wentry // the objects no subscription hosts
	whole map[string]any     // objects the transform could not compact (none in practice)
	gen   uint8              // of the last Replace
	// streamed: the last list was streamList's, whose objects are stored
	// already (with gen): the Replace that follows only sweeps.
	streamed bool
	// dead: replaced by other informers (Monitor.narrow); stores nothing.
	dead bool

	synced     chan struct{} // closed at the first Replace
	syncedOnce sync.Once
	closed     chan struct{}
	closeOnce  sync.Once
}

var (
	_ cache.Queue             = (*wstore)(nil)
	_ cache.TransformingStore = (*wstore)(nil)
)

// newWstore is the store of kind in namespace ns ("" all); host, when not
// nil, keeps the entries of the subscribed objects.
func newWstore(kind, ns string, transform cache.TransformFunc, host entryHost, onEvent func(any, bool)) *wstore {
	s := &wstore{kind: kind, namespace: ns, transform: transform, host: host, onEvent: onEvent,
		items: map[string]*wentry{}, synced: make(chan struct{}), closed: make(chan struct{})}
	s.mu = host
	if host == nil {
		s.mu = &sync.Mutex{}
	}
	return s
}

// keyBytes is the key of ns/name in buf.
func (s *wstore) keyBytes(buf []byte, ns, name string) []byte {
	b := append(buf[:0], ns...)
	b = append(b, '|')
	b = append(b, s.kind...)
	b = append(b, '|')
	return append(b, name...)
}

// keyParts are the namespace and name of a key.
func keyParts(key string) (ns, name string) {
	ns, rest, _ := strings.Cut(key, "|")
	_, name, _ = strings.Cut(rest, "|")
	return ns, name
}

// transformed is obj through the transform, with its namespace and name.
func (s *wstore) transformed(obj any) (t any, ns, name string, ok bool, err error) {
	if t, err = s.transform(obj); err != nil {
		return nil, "", "", false, err
	}
	ns, name, _, ok = identity(t)
	return t, ns, name, ok, nil
}

// hostedLocked is the hosted entry of ns/name, or nil (always, once the
// store is dead: the entries are the live store's).
func (s *wstore) hostedLocked(ns, name string, adopt bool) *wentry {
	if s.host == nil || s.dead {
		return nil
	}
	return s.host.hostLocked(s.kind, ns, name, adopt)
}

// setLocked stores t, the object ns/name under the key in b: in place
// when it is held, else in its subscription's entry (adopted), else under
// a new key of the store's own.
func (s *wstore) setLocked(b []byte, ns, name string, t any, gen uint8) {
	if s.dead {
		return
	}
	c, ok := t.(*compacted)
	if !ok {
		delete(s.items, string(b))
		if e := s.hostedLocked(ns, name, false); e != nil {
			*e = wentry{}
		}
		if s.whole == nil {
			s.whole = map[string]any{}
		}
		s.whole[string(b)] = t
		return
	}
	e := s.items[string(b)]
	if e == nil {
		e = s.hostedLocked(ns, name, true)
	}
	if e == nil {
		e = new(wentry)
		s.items[string(b)] = e
	}
	hosted := e.hosted
	*e = entryOf(c)
	e.gen, e.hosted = gen, hosted
	if s.whole != nil {
		delete(s.whole, string(b))
	}
}

func (s *wstore) isSynced() bool {
	select {
	case <-s.synced:
		return true
	default:
		return false
	}
}

// Add and Update store the object and, once synced, report it.
func (s *wstore) Add(obj any) error    { return s.put(obj) }
func (s *wstore) Update(obj any) error { return s.put(obj) }

func (s *wstore) put(obj any) error {
	t, ns, name, ok, err := s.transformed(obj)
	if err != nil || !ok {
		return err
	}
	s.store(t, ns, name)
	if s.isSynced() {
		s.onEvent(t, false)
	}
	return nil
}

// store keeps t, the object ns/name transformed, marked with the current
// generation.
func (s *wstore) store(t any, ns, name string) {
	var buf [192]byte
	b := s.keyBytes(buf[:0], ns, name)
	s.mu.Lock()
	s.setLocked(b, ns, name, t, s.gen)
	s.mu.Unlock()
}

// Delete drops the object and, once synced, reports it deleted.
func (s *wstore) Delete(obj any) error {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	t, ns, name, ok, err := s.transformed(obj)
	if err != nil || !ok {
		return err
	}
	var buf [192]byte
	b := s.keyBytes(buf[:0], ns, name)
	s.mu.Lock()
	delete(s.items, string(b))
	delete(s.whole, string(b))
	if e := s.hostedLocked(ns, name, false); e != nil {
		*e = wentry{}
	}
	s.mu.Unlock()
	if s.isSynced() {
		s.onEvent(t, true)
	}
	return nil
}

// Replace makes list the store's contents, in place: each object listed is
// stored marked with a new generation, then every entry of an older one
// (not in the list) is dropped. The first Replace ends the initial sync
// (reported by synced; the handlers are not called: snapshotAll reads the
// objects from the store); a later one (a relist: the watch expired or
// broke) reports every object listed, and, deleted, every object dropped:
// gone while the watch was down.
func (s *wstore) Replace(list []any, _ string) error {
	s.mu.Lock()
	if s.streamed {
		// The objects came through streamList, which stored them
		// marked with this generation: list is empty.
		s.streamed = false
	} else {
		s.gen++
	}
	gen := s.gen
	s.mu.Unlock()
	for i, obj := range list {
		t, ns, name, ok, err := s.transformed(obj)
		if err != nil {
			return err
		}
		list[i] = nil
		if ok {
			list[i] = t
			s.store(t, ns, name)
		}
	}
	var gone []any
	s.mu.Lock()
	for k, e := range s.items {
		if e.gen != gen {
			ns, name := keyParts(k)
			gone = append(gone, e.view(ns, name))
			delete(s.items, k)
		}
	}
	if s.host != nil && !s.dead {
		s.host.eachHostedLocked(s.kind, s.namespace, func(e *wentry, ns, name string) {
			if e.gen != gen {
				gone = append(gone, e.view(ns, name))
				*e = wentry{}
			}
		})
	}
	if s.whole != nil {
		listed := map[any]bool{}
		for _, t := range list {
			if t != nil {
				listed[t] = true
			}
		}
		for k, t := range s.whole {
			if !listed[t] {
				gone = append(gone, t)
				delete(s.whole, k)
			}
		}
	}
	s.mu.Unlock()

	first := false
	s.syncedOnce.Do(func() { first = true; close(s.synced) })
	if first {
		return nil
	}
	for _, t := range list {
		if t != nil {
			s.onEvent(t, false)
		}
	}
	for _, t := range gone {
		s.onEvent(t, true)
	}
	return nil
}

// get is the object held for ns/name, as the handlers read it.
func (s *wstore) get(ns, name string) (any, bool) {
	var buf [192]byte
	b := s.keyBytes(buf[:0], ns, name)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.items[string(b)]; ok {
		return e.view(ns, name), true
	}
	if e := s.hostedLocked(ns, name, false); e != nil {
		return e.view(ns, name), true
	}
	t, ok := s.whole[string(b)]
	return t, ok
}

// len is the number of objects held.
func (s *wstore) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.items) + len(s.whole)
	if s.host != nil {
		s.host.eachHostedLocked(s.kind, s.namespace, func(*wentry, string, string) { n++ })
	}
	return n
}

// Resync does nothing: the informers have no resync period.
func (s *wstore) Resync() error { return nil }

// Pop never hands anything out (the store reports its events itself): it
// waits for Close.
func (s *wstore) Pop(cache.PopProcessFunc) (any, error) {
	<-s.closed
	return nil, cache.ErrFIFOClosed
}

func (s *wstore) HasSynced() bool { return s.isSynced() }

func (s *wstore) HasSyncedChecker() cache.DoneChecker { return syncedChecker{s} }

func (s *wstore) Close() { s.closeOnce.Do(func() { close(s.closed) }) }

// Transformer is the reflector's transform for the objects of a
// watch-list, which it gathers before Replace: they wait compacted.
func (s *wstore) Transformer() cache.TransformFunc { return s.transform }

type syncedChecker struct{ s *wstore }

func (c syncedChecker) Name() string          { return c.s.kind + " informer" }
func (c syncedChecker) Done() <-chan struct{} { return c.s.synced }

// workloadListWatch is the label-filtered list and watch of kind in ns
// ("" all) for s's reflector. Its list streams (streamList) where the
// client streams lists: the reflector then gets an empty list with the
// stream's resource version, and never gathers the objects itself (its
// own watch-list keeps every object of the list in a store of its own
// until the end, then hands them all to Replace); where the client does
// not (fake clientsets) or the server refuses, it is the typed list.
func workloadListWatch(c kubernetes.Interface, s *wstore, kind, ns string, idle time.Duration) (cache.ListerWatcher, kruntime.Object, error) {
	l, err := listerFor(c, kind, ns)
	if err != nil {
		return nil, nil, err
	}
	streams := !watchlist.DoesClientNotSupportWatchListSemantics(c)
	var list func(context.Context, metav1.ListOptions) (kruntime.Object, error)
	var watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error)
	var typ kruntime.Object
	var empty func(rv string) kruntime.Object
	switch kind {
	case runtimeid.KindDeployment:
		r := c.AppsV1().Deployments(ns)
		typ = &appsv1.Deployment{}
		list = func(ctx context.Context, o metav1.ListOptions) (kruntime.Object, error) { return r.List(ctx, o) }
		watchFn = r.Watch
		empty = func(rv string) kruntime.Object {
			return &appsv1.DeploymentList{ListMeta: metav1.ListMeta{ResourceVersion: rv}}
		}
	default:
		r := c.BatchV1().Jobs(ns)
		typ = &batchv1.Job{}
		list = func(ctx context.Context, o metav1.ListOptions) (kruntime.Object, error) { return r.List(ctx, o) }
		watchFn = r.Watch
		empty = func(rv string) kruntime.Object {
			return &batchv1.JobList{ListMeta: metav1.ListMeta{ResourceVersion: rv}}
		}
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (kruntime.Object, error) {
			if streams {
				rv, n, err := s.streamList(ctx, l, idle)
				if err == nil {
					return empty(rv), nil
				}
				if n > 0 || !(apierrors.IsBadRequest(err) || apierrors.IsInvalid(err) || apierrors.IsMethodNotSupported(err)) {
					return nil, err
				}
			}
			o.LabelSelector = WorkloadLabel
			return list(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = WorkloadLabel
			return watchFn(ctx, o)
		},
	}
	// The reflector lists (through lw), never a watch-list of its own.
	return cache.ToListWatcherWithWatchListSemantics(lw, noWatchList{}), typ, nil
}

// noWatchList makes a reflector list instead of its own watch-list.
type noWatchList struct{}

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }

// streamList streams the labelled objects of l through one watch-list
// request and stores each as it arrives, marked with a new generation (the
// Replace that follows sweeps the rest); once synced, each is reported as
// it is stored (a relist). It returns the resource version of the end of
// the initial events and how many objects came. idle bounds the wait for
// the answer and for each object.
func (s *wstore) streamList(ctx context.Context, l lister, idle time.Duration) (rv string, n int, err error) {
	s.mu.Lock()
	s.gen++
	s.streamed = false
	s.mu.Unlock()
	synced := s.isSynced()
	rv, n, err = watchList(ctx, l, WorkloadLabel, idle, func(o any) error {
		t, ns, name, ok, err := s.transformed(o)
		if err != nil || !ok {
			return err
		}
		s.store(t, ns, name)
		if synced {
			s.onEvent(t, false)
		}
		return nil
	})
	if err != nil {
		return "", n, err
	}
	s.mu.Lock()
	s.streamed = true
	s.mu.Unlock()
	return rv, n, nil
}
