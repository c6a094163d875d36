package monitor

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime/trace"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/gobrave/kubectl-gobrave/pkg/runtime"
	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// ReconcileOptions configures Reconcile.
type ReconcileOptions struct {
	// Owner identifies this process in the leases (see Options.Owner).
	Owner store.Owner
	// LeaseTTL is the lifetime of the leases taken (default 15s).
	LeaseTTL time.Duration
	// SyncTimeout bounds the wait for the next object of a stream (default 30s).
	SyncTimeout time.Duration
	// ClusterWide: more namespaces than this and each resource is read
	// once cluster-wide instead of once per namespace (default 10).
	ClusterWide int
	// Runtimes are the runtimes whose records live on this client's
	// cluster; Reconcile reads only their records.
	Runtimes []string
	// Namespace, when set, keeps the records of this namespace only (ps -n NS --refresh). [nogets]
	Namespace string
	// Cluster is the identity of the cluster now ("" when unknown); a
	// record made on another cluster is skipped and passed to OnSkip.
	Cluster string
	OnSkip  func(runtimeID, recorded string)
	// Metadata confirms absences with metadata-only lists; nil uses the
	// typed client's lists (whole objects, page by page).
	Metadata metadata.Interface
	// OnEvent is called for every event recorded (see Options.OnEvent).
	OnEvent func(store.Event)
	// Scopes, when not nil, are the store's LiveScopes read by the caller
	// at ScopesAt, which is then when the pass begins: Reconcile does not
	// read them again (a scan of every record: 0.6–1.5 s at 100,000).
	Scopes   []store.Scope
	ScopesAt time.Time
}

// Reconcile is one reconcile pass over every non-terminal record of
// o.Runtimes (recover --once) in memory for a batch, not for the number of
// records, and in a number of API requests that does not depend on it:
//
//  1. pods, then ReplicaSets: one watch-list each per scope (a namespace,
//     or all), label-filtered; of each pod only its owner's newest pod
//     status and newest failed termination are kept (pod reasons, exit codes);
//  2. the workload kinds at once, each one watch-list per scope, alongside
//     step 1 (the writer holds back the objects that may have pods until
//     it ends, see write); each object
//     is mapped (runtime.Observe) as it arrives and dropped; every batch of
//     firstBatch, then twice as many, up to batchSize objects goes to one writer, which in one transaction
//     (store.ApplyFree) reads their records once, takes their leases,
//     records the observations and releases the leases while the streams go on.
//     Of each object with a record only a 64-bit hash of its key is kept,
//     8 bytes in a slice sized by the records live at the start (keySet);
//  3. when fewer records of a kind were streamed than were live at the
//     start, the records whose object was not streamed are read page by
//     page; for the namespaces that have any, one metadata-only watch-list
//     (no label selector) tells which still exist: an object whose label was
//     removed is not deleted, one with another UID is not the recorded one.
//     The rest are recorded ContainerDeleted, a page at a time.
//
// Records changed after the pass began are left to the monitors that
// changed them. A record leased by a live process is skipped (see Options.Once).
func Reconcile(ctx context.Context, c kubernetes.Interface, st *store.Store, o ReconcileOptions) (Summary, error) {
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.SyncTimeout <= 0 {
		o.SyncTimeout = DefaultSyncTimeout
	}
	if o.ClusterWide <= 0 {
		o.ClusterWide = DefaultClusterWide
	}
	started := time.Now()
	if o.Scopes != nil && !o.ScopesAt.IsZero() {
		started = o.ScopesAt
	} else {
		o.Scopes = nil
	}
	r := &reconciler{c: c, st: st, o: o, started: started, notes: map[types.UID]*podNote{}, seen: map[string]*keySet{}}
	if o.Metadata != nil {
		r.meta = metadataLister(o.Metadata, o.SyncTimeout)
	} else {
		r.meta = typedLister(c, o.SyncTimeout)
	}
	err := r.run(ctx)
	return r.sum, err
}

type reconciler struct {
	c       kubernetes.Interface
	st      *store.Store
	o       ReconcileOptions
	meta    metaLister
	started time.Time

	notes map[types.UID]*podNote // by controller UID: a Job, a ReplicaSet, then its Deployment
	// replicaSetPods: a pod streamed is controlled by a ReplicaSet, whose
	// Deployment only the ReplicaSets' stream can tell.
	replicaSetPods bool
	// seen holds, by kind, the keyHash of each object streamed that has a
	// record, with the number of its records that were live when the pass
	// began: when their sum reaches the number of such records, none can
	// be absent and none is read again. Written by the writer only while
	// the streams run, sealed once they end.
	seen map[string]*keySet
	sum  Summary
	// notesDone: the pods' and ReplicaSets' streams have ended, and notes
	// is complete. Before, notes is being written by them and must not be
	// read at all: the writer records only objects that need no note (see
	// write). Set and read by the writer only.
	notesDone bool
}

// keySet is a set of 64-bit key hashes, each with a small count, in 8
// bytes an entry (a Go map of them takes 20–24 bytes an entry at 100,000:
// the largest part of recover's heap that grows with N). Entries are
// appended while the streams run (a stream tried again appends its objects
// again), then seal sorts them and keeps one entry a key, after which has
// looks keys up by binary search.
type keySet struct {
	keys   []uint64 // the hash's top 60 bits | the count, at most countMask
	sealed bool
}

// countMask: the low bits of an entry hold its count. Dropping them from
// the hash leaves 60 bits: at 100,000 keys the odds of a collision are ~1e-8.
const countMask = 1<<4 - 1

// add appends key h with count n (capped at countMask: a lower count only
// makes the pass read more records, never fewer).
func (s *keySet) add(h uint64, n int) {
	s.keys = append(s.keys, h&^countMask|uint64(min(max(n, 0), countMask)))
	s.sealed = false
}

// seal sorts the set and keeps one entry a key (the one with the highest
// count: a stream tried again sees the records it recorded as changed
// since the pass began), and returns the sum of the counts.
func (s *keySet) seal() int {
	if s == nil {
		return 0
	}
	slices.Sort(s.keys)
	out := s.keys[:0]
	for i, k := range s.keys {
		if i+1 < len(s.keys) && s.keys[i+1]&^countMask == k&^countMask {
			continue // the same key follows with a count as high or higher
		}
		out = append(out, k)
	}
	s.keys = slices.Clip(out)
	s.sealed = true
	sum := 0
	for _, k := range s.keys {
		sum += int(k & countMask)
	}
	return sum
}

// has reports whether key h was added (sealing the set first if needed).
func (s *keySet) has(h uint64) bool {
	if s == nil {
		return false
	}
	if !s.sealed {
		s.seal()
	}
	h &^= countMask
	i, _ := slices.BinarySearch(s.keys, h)
	return i < len(s.keys) && s.keys[i]&^countMask == h
}

// podNote is what the pods of one controller say: the newest pod's status
// and the newest failed termination of any of them.
type podNote struct {
	created time.Time
	name    string
	status  runtime.PodStatus
	fail    *corev1.ContainerStateTerminated
}

// keyHash is the 64-bit FNV-1a hash of kind, ns and name, each followed by
// a zero byte but the last, computed in place (hash/fnv's Write of each
// string converted to bytes allocates, once per object streamed).
func keyHash(kind, ns, name string) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for k, s := range [3]string{kind, ns, name} {
		if k > 0 {
			h = (h ^ 0) * prime
		}
		for i := 0; i < len(s); i++ {
			h = (h ^ uint64(s[i])) * prime
		}
	}
	return h
}

func (r *reconciler) run(ctx context.Context) error {
	scopes := r.o.Scopes
	if scopes == nil {
		var err error
		if scopes, err = r.st.LiveScopes(ctx); err != nil {
			return fmt.Errorf("monitor: %w", err)
		}
	}
	nsOf := map[string]map[string]bool{} // kind -> namespaces
	want := map[string]int{}             // kind -> records live at the start
	all := map[string]bool{}
	others := false
	for _, sc := range scopes {
		if !slices.Contains(r.o.Runtimes, sc.Runtime) || !r.inNamespace(sc.Namespace) { // [nogets] inNamespace
			continue
		}
		if r.o.Cluster != "" && sc.Cluster != "" && sc.Cluster != r.o.Cluster {
			others = true // not ours to check: nothing is read for them
			continue
		}
		if nsOf[sc.Kind] == nil {
			nsOf[sc.Kind] = map[string]bool{}
		}
		nsOf[sc.Kind][sc.Namespace] = true
		all[sc.Namespace] = true
		want[sc.Kind] += sc.Count
	}
	if others && r.o.OnSkip != nil {
		if err := r.skipOthers(ctx); err != nil {
			return err
		}
	}
	if len(all) == 0 {
		return nil
	}
	clusterWide := len(all) > r.o.ClusterWide
	podScopes := slices.Sorted(maps.Keys(all))

	// The pods and ReplicaSets (aux) stream while the workload streams
	// open and start: their notes are read by the writer only, which
	// holds back the objects that may have pods until they have ended
	// (write). The workload streams wait for the writer (a batch or two
	// each), not for aux: their requests' first answer and the aux
	// streams' overlap.
	aux := func(ctx context.Context) error {
		reg := trace.StartRegion(ctx, "reconcile pods")
		err := r.each(ctx, kindPod, podScopes, clusterWide, r.addPod)
		reg.End()
		if err != nil {
			return err
		}
		// The ReplicaSets only lead a pod's note to its Deployment: without a
		// pod of a ReplicaSet they are not read (most Deployments of a large
		// cluster are scaled to zero, each with a ReplicaSet as large as itself).
		if nsOf[runtimeid.KindDeployment] != nil && r.replicaSetPods {
			reg := trace.StartRegion(ctx, "reconcile replicasets")
			err := r.each(ctx, kindReplicaSet, podScopes, clusterWide, r.addReplicaSet)
			reg.End()
			if err != nil {
				return err
			}
		}
		return nil
	}
	kinds := slices.Sorted(maps.Keys(nsOf))
	for _, kind := range kinds {
		r.seen[kind] = &keySet{keys: make([]uint64, 0, want[kind])}
	}
	if err := r.workloads(ctx, kinds, nsOf, clusterWide, aux); err != nil {
		return err
	}
	for _, kind := range kinds {
		if r.seen[kind].seal() >= want[kind] {
			continue // every record live at the start was streamed: none is absent
		}
		if err := r.absent(ctx, kind); err != nil {
			return err
		}
	}
	return nil
}

// workloads streams every workload kind at once, each in its scopes, and
// records what they say in one writer: a stream maps each object as it
// arrives into a batch of batchSize, the writer records the full
// batches one after the other (the store has one writer), so that the
// decoding of one kind, the mapping and the database overlap. At most
// len(kinds)+2 batches exist at a time, and a held batch a kind. aux (the pods' and ReplicaSets'
// streams, which fill r.notes) runs alongside the streams; until it has
// ended the writer records only the objects that cannot have pods, and
// holds the others back (write). The first batches of a stream are
// small (firstBatch, doubling up to batchSize): the writer starts as soon
// as the first objects arrive, not after batchSize of them, and its first
// transaction (a cold page cache, statements prepared) overlaps the rest
// of the stream.
func (r *reconciler) workloads(ctx context.Context, kinds []string, nsOf map[string]map[string]bool, clusterWide bool, aux func(context.Context) error) error {
	gctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	run := func(fn func() error) { // the first error cancels the others
		wg.Go(func() {
			if err := fn(); err != nil {
				once.Do(func() { first = err; cancel(err) })
			}
		})
	}
	auxDone := make(chan struct{})
	var auxErr error // set before auxDone is closed
	run(func() error {
		defer close(auxDone)
		auxErr = aux(gctx)
		return auxErr
	})
	full := make(chan *batch, 1)
	free := make(chan *batch, len(kinds)+1)
	next := func(kind string) *batch {
		select {
		case b := <-free:
			b.kind = kind
			return b
		default:
			return &batch{kind: kind, items: make([]streamed, 0, batchSize), ids: make([]string, 0, batchSize*len(r.o.Runtimes))}
		}
	}
	send := func(b *batch) error {
		defer trace.StartRegion(gctx, "reconcile send").End()
		select {
		case full <- b:
			return nil
		case <-gctx.Done():
			return context.Cause(gctx)
		}
	}
	var streams sync.WaitGroup
	for _, kind := range kinds {
		streams.Add(1)
		run(func() error {
			defer streams.Done()
			defer trace.StartRegion(gctx, "reconcile stream "+kind).End()
			b := next(kind)
			limit := firstBatch
			err := r.each(gctx, kind, slices.Sorted(maps.Keys(nsOf[kind])), clusterWide, func(obj any) error {
				m, ok := obj.(metav1.Object)
				if !ok {
					return nil
				}
				o, ok := observeStreamed(obj)
				ns, name := m.GetNamespace(), m.GetName()
				b.items = append(b.items, streamed{ns: ns, name: name, uid: string(m.GetUID()), obs: o, ok: ok, pods: mayHavePods(obj)})
				for _, rt := range r.o.Runtimes { // here, not in the writer: the writer is the pass's bottleneck
					b.ids = append(b.ids, runtimeid.ID{Runtime: rt, Namespace: ns, Kind: kind, Name: name}.String())
				}
				if len(b.items) < limit {
					return nil
				}
				if err := send(b); err != nil {
					return err
				}
				b = next(kind)
				limit = min(2*limit, batchSize)
				return nil
			})
			if err == nil && len(b.items) > 0 {
				err = send(b)
			}
			return err
		})
	}
	go func() {
		streams.Wait()
		close(full)
	}()
	run(func() error {
		return r.write(gctx, kinds, full, free, auxDone, &auxErr)
	})
	wg.Wait()
	return first
}

// each streams kind in every scope: all namespaces when clusterWide (one
// per namespace instead when RBAC refuses that), else each of nss. Pods and
// ReplicaSets that cannot be read leave the workloads without pod reasons.
func (r *reconciler) each(ctx context.Context, kind string, nss []string, clusterWide bool, fn func(any) error) error {
	aux := kind == kindPod || kind == kindReplicaSet
	if clusterWide {
		err := r.streamIn(ctx, kind, "", fn)
		if err == nil || !isDenied(err) {
			return err
		}
	}
	for _, ns := range nss {
		err := r.streamIn(ctx, kind, ns, fn)
		if err != nil && aux && isDenied(err) {
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (r *reconciler) streamIn(ctx context.Context, kind, ns string, fn func(any) error) error {
	// The ReplicaSets are read whole, though only their UID and controller
	// are needed: a metadata-only watch-list of 5,000 took recover 1.36 s
	// against 1.19 s whole (hack/bench -pause-idle=false, N = 10,000, 3
	// runs each): the API server converts every object for it.
	l, err := listerFor(r.c, kind, ns)
	if err != nil {
		return err
	}
	err = retryStream(ctx, r.o.SyncTimeout, func() error { return stream(ctx, r.c, l, WorkloadLabel, r.o.SyncTimeout, fn) })
	if err == nil || ctx.Err() != nil {
		return err
	}
	where, canI := whereIn(r.c, ns)
	res := kind + "s"
	if isDenied(err) {
		return fmt.Errorf("monitor: list %s %s is forbidden: %w: check access with 'kubectl auth can-i list %s %s' and 'kubectl auth can-i watch %s %s'", res, where, err, res, canI, res, canI)
	}
	return fmt.Errorf("monitor: list %s %s: %w: check the connection to the cluster ('kubectl gobrave doctor')", res, where, runtime.Brief(err))
}

// whereIn says which objects a list in namespace ns ("" all) of client c
// reads, for messages ("in namespace \"a\" at 10.0.0.1:6443": the address,
// said here, as the error does not always carry it), and the namespace
// flags of a kubectl command about them.
func whereIn(c kubernetes.Interface, ns string) (where, canI string) {
	where, canI = fmt.Sprintf("in namespace %q", ns), "-n "+ns
	if ns == "" {
		where, canI = "in all namespaces", "--all-namespaces"
	}
	return where + runtime.ServerAt(c), canI
}

// addPod keeps what a pod says about its controller.
func (r *reconciler) addPod(obj any) error {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil
	}
	ref := metav1.GetControllerOf(p)
	if ref == nil {
		return nil
	}
	if ref.Kind == "ReplicaSet" {
		r.replicaSetPods = true
	}
	n := r.notes[ref.UID]
	if n == nil {
		n = &podNote{}
		r.notes[ref.UID] = n
	}
	if n.name == "" || p.CreationTimestamp.After(n.created) || p.CreationTimestamp.Time.Equal(n.created) && p.Name > n.name {
		n.created, n.name = p.CreationTimestamp.Time, p.Name
		n.status = runtime.PodStatusOf(p)
	}
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 && (n.fail == nil || t.FinishedAt.After(n.fail.FinishedAt.Time)) {
			n.fail = t.DeepCopy()
		}
	}
	return nil
}

// addReplicaSet moves the note of a ReplicaSet's pods to its Deployment.
func (r *reconciler) addReplicaSet(obj any) error {
	rs, ok := obj.(*appsv1.ReplicaSet)
	if !ok {
		return nil
	}
	ref := metav1.GetControllerOf(rs)
	n := r.notes[rs.GetUID()]
	if ref == nil || n == nil {
		return nil
	}
	delete(r.notes, rs.GetUID())
	d := r.notes[ref.UID]
	if d == nil {
		r.notes[ref.UID] = n
		return nil
	}
	if n.created.After(d.created) || n.created.Equal(d.created) && n.name > d.name {
		d.created, d.name, d.status = n.created, n.name, n.status
	}
	if n.fail != nil && (d.fail == nil || n.fail.FinishedAt.After(d.fail.FinishedAt.Time)) {
		d.fail = n.fail
	}
	return nil
}

// observeStreamed maps a streamed object: Deployments and Jobs directly
// (observe, through runtime.Observe, finds an object's kind by slimming
// it: a copy of its metadata and status made and dropped for each of the
// objects a pass streams), anything else through observe.
func observeStreamed(obj any) (Observation, bool) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return runtime.DeploymentEvent(o)
	case *batchv1.Job:
		return runtime.JobEvent(o)
	}
	return observe(obj)
}

// streamed is one object as mapped when it arrived.
type streamed struct {
	ns, name, uid string
	obs           Observation
	ok            bool
	// pods: the object's own status leaves room for a pod of it
	// (mayHavePods), whose note its record may need; it is not recorded
	// before the pods' and ReplicaSets' streams have ended.
	pods bool
}

// firstBatch is the size of the first batch of a stream of workloads; each
// next one is twice the last, up to batchSize.
const firstBatch = 32

type batch struct {
	kind  string
	items []streamed
	// ids are the items' runtime IDs, built by the stream: ids[i*len(Runtimes)+k]
	// is item i's in runtime k.
	ids []string
}

// flush records one batch of streamed objects.
func (r *reconciler) flush(ctx context.Context, b *batch) error {
	items, ids := b.items, b.ids
	defer func() {
		clear(items) // no strings kept alive by a batch waiting for reuse
		clear(ids)
		b.items, b.ids = items[:0], ids[:0]
	}()
	if len(items) == 0 {
		return nil
	}
	if flushedHook != nil {
		flushedHook(b.kind, len(items))
	}
	// What the batch records of the IDs taken (leased): the same whatever
	// the call, as ApplyFree asks. ids[i*len(r.o.Runtimes)+k] is item i's
	// ID in runtime k.
	now := time.Now()
	build := func(recs map[string]store.Head, leased []string) store.FreeBatch {
		isLeased := make(map[string]bool, len(leased))
		for _, id := range leased {
			isLeased[id] = true
		}
		// One transition a leased ID is the common case (more when another
		// object took a name or its pods add a status): sized once, not grown.
		fb := store.FreeBatch{Transitions: make([]store.Transition, 0, len(leased))}
		for i, it := range items {
			for k := range r.o.Runtimes {
				id := ids[i*len(r.o.Runtimes)+k]
				if !isLeased[id] {
					continue
				}
				w := recs[id]
				add := func(o Observation) {
					fb.Transitions = append(fb.Transitions, store.Transition{RuntimeID: id, Type: o.Type, Message: o.Message, UID: o.UID, Time: now, Result: o.Result})
				}
				if w.UID != "" && w.UID != it.uid {
					add(Deleted(types.UID(w.UID))) // another object took the name
				}
				if it.ok {
					add(r.enrich(b.kind, it.uid, it.obs))
				} else if w.UID == "" {
					fb.UIDs = append(fb.UIDs, [2]string{id, it.uid})
				}
				if !r.notesDone {
					continue // it needs no note (write)
				}
				if n := r.notes[types.UID(it.uid)]; n != nil {
					if o, ok := n.status.Observation(it.uid); ok {
						add(o)
					}
				}
			}
		}
		return fb
	}
	// One transaction: the records' heads, the leases free, the UIDs, the
	// transitions. Leased are the records live (not terminal) and made on
	// this cluster (or on none recorded).
	live := func(_ string, h store.Head) bool { return !h.State.Terminal() && !r.otherClusterHead(h) }
	reg := trace.StartRegion(ctx, "reconcile apply")
	recs, leased, res, err := r.st.ApplyFree(ctx, r.o.Owner, ids, r.o.LeaseTTL, live, build)
	reg.End()
	if err != nil {
		return fmt.Errorf("monitor: record %d objects: %w", len(items), err)
	}
	// The records of another cluster are not this pass's (absent names
	// them, OnSkip, with the unseen records).
	for id, h := range recs {
		if r.otherClusterHead(h) {
			delete(recs, id)
		}
	}
	for i, it := range items {
		known, fromStart := false, 0
		for k := range r.o.Runtimes {
			w, ok := recs[ids[i*len(r.o.Runtimes)+k]]
			if !ok || w.State.Terminal() {
				continue
			}
			known = true
			if !w.UpdatedAt.After(r.started) {
				fromStart++ // live when the pass began
			}
		}
		if known { // a stream tried again passes its objects again: seal keeps one
			r.seen[b.kind].add(keyHash(b.kind, it.ns, it.name), fromStart)
		}
	}
	r.sum.Reattached += len(leased)
	r.count(func(id string) store.State { return recs[id].State }, res)
	return nil
}

// otherClusterHead reports whether a record was made on another cluster
// than this one.
func (r *reconciler) otherClusterHead(h store.Head) bool {
	return r.o.Cluster != "" && h.Cluster != "" && h.Cluster != r.o.Cluster
}

// enrich adds the exit code of the newest failed container to a job failure.
func (r *reconciler) enrich(kind, uid string, o Observation) Observation {
	if o.Type != store.ContainerFailed || kind != runtimeid.KindJob || !r.notesDone {
		return o
	}
	if n := r.notes[types.UID(uid)]; n != nil && n.fail != nil {
		code := n.fail.ExitCode
		o.ExitCode = &code
		o.Message = exitDetail(n.fail) + ": " + o.Message
	}
	return o
}

// lease takes the leases of ids it can; those a live process holds are
// that process's to record.
func (r *reconciler) lease(ctx context.Context, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	leased, err := r.st.AcquireLeases(ctx, r.o.Owner, ids, r.o.LeaseTTL)
	if err != nil {
		return nil, fmt.Errorf("monitor: %w", err)
	}
	r.sum.Reattached += len(leased)
	return leased, nil
}

// apply records ts (one transaction), counts what changed (before is the
// state of a record before the pass), calls OnEvent and releases leased.
func (r *reconciler) apply(ctx context.Context, before func(id string) store.State, ts []store.Transition, leased []string) error {
	defer func() {
		if len(leased) > 0 {
			defer trace.StartRegion(ctx, "reconcile release").End()
			_ = r.st.ReleaseLeases(context.WithoutCancel(ctx), r.o.Owner, leased...)
		}
	}()
	if len(ts) == 0 {
		return nil
	}
	reg := trace.StartRegion(ctx, "reconcile apply")
	res, err := r.st.ApplyBatchNoSpecs(ctx, ts)
	reg.End()
	if errors.Is(err, store.ErrNotFound) {
		res, _, err = applyEach(ctx, r.st, ts) // a record was removed meanwhile
	}
	if err != nil {
		return fmt.Errorf("monitor: record %d events: %w", len(ts), err)
	}
	r.count(before, res)
	return nil
}

// count counts what res changed (before is the state of a record before
// the pass) and calls OnEvent with each event recorded.
func (r *reconciler) count(before func(id string) store.State, res []store.Applied) {
	after := make(map[string]store.State, len(res))
	for _, a := range res {
		after[a.Workload.RuntimeID] = a.Workload.State
		if a.Applied && r.o.OnEvent != nil {
			r.o.OnEvent(a.Event)
		}
	}
	for id, s := range after {
		if s != before(id) {
			r.sum.Changed++
		}
		if s.Terminal() {
			r.sum.Terminal++
		}
	}
}

// absent finds the records of kind whose object the stream did not show
// and records those whose object is gone (see Reconcile, step 3).
func (r *reconciler) absent(ctx context.Context, kind string) error {
	// Pass 1: the candidates, by namespace, with their recorded UID.
	cand := map[string]map[uint64]string{}
	const several = "\x00" // two records of one object with different UIDs
	err := r.st.ScanLive(ctx, store.ScanFilter{Runtimes: r.o.Runtimes, Kind: kind}, listPage, func(page []store.LiveRecord) error {
		for _, w := range page {
			if !r.unseen(w) {
				continue
			}
			h := keyHash(kind, w.Namespace, w.Name)
			if cand[w.Namespace] == nil {
				cand[w.Namespace] = map[uint64]string{}
			}
			if u, ok := cand[w.Namespace][h]; ok && u != w.UID {
				cand[w.Namespace][h] = several
				continue
			}
			cand[w.Namespace][h] = w.UID
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("monitor: %w", err)
	}
	if len(cand) == 0 {
		return nil
	}
	// One metadata-only list per namespace: what still exists.
	gone := map[uint64]bool{}
	for _, ns := range slices.Sorted(maps.Keys(cand)) {
		c := cand[ns]
		there := map[uint64]bool{}
		err := retryStream(ctx, r.o.SyncTimeout, func() error {
			clear(there)
			return r.meta(ctx, kind, ns, func(name, uid string) error {
				h := keyHash(kind, ns, name)
				if u, ok := c[h]; ok && (u == "" || u == uid || u == several) {
					there[h] = true // still there: its label was removed, or it is the one recorded
				}
				return nil
			})
		})
		for h := range there {
			delete(c, h)
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if apierrors.IsNotFound(err) {
				err = nil // the namespace is gone, and its objects with it
			} else {
				continue // not confirmed: nothing is recorded
			}
		}
		for h := range c {
			gone[h] = true
		}
	}
	// Pass 2: lease the unseen records, record the gone ones, a page at a time.
	return r.st.ScanLive(ctx, store.ScanFilter{Runtimes: r.o.Runtimes, Kind: kind}, listPage, func(page []store.LiveRecord) error {
		var ids []string
		before := map[string]store.Workload{}
		for _, w := range page {
			if r.unseen(w) {
				ids = append(ids, w.RuntimeID)
				before[w.RuntimeID] = w.Workload
			}
		}
		leased, err := r.lease(ctx, ids)
		if err != nil {
			return err
		}
		now := time.Now()
		var ts []store.Transition
		for _, id := range leased {
			w := before[id]
			if gone[keyHash(kind, w.Namespace, w.Name)] {
				o := Deleted(types.UID(w.UID))
				ts = append(ts, store.Transition{RuntimeID: id, Type: o.Type, UID: o.UID, Time: now})
			}
		}
		return r.apply(ctx, func(id string) store.State { return before[id].State }, ts, leased)
	})
}

// unseen reports whether w is a record of this pass whose object was not
// streamed: made on this cluster, not changed since the pass began.
func (r *reconciler) unseen(w store.LiveRecord) bool {
	if r.seen[w.Kind].has(keyHash(w.Kind, w.Namespace, w.Name)) {
		return false
	}
	if w.UpdatedAt.After(r.started) || !r.inNamespace(w.Namespace) { // [nogets] inNamespace
		return false // changed during the pass (its monitor records it), or not the pass's namespace
	}
	return !r.otherCluster(w)
}

// skipOthers passes the records made on another cluster to OnSkip.
func (r *reconciler) skipOthers(ctx context.Context) error {
	err := r.st.ScanLive(ctx, store.ScanFilter{Runtimes: r.o.Runtimes}, listPage, func(page []store.LiveRecord) error {
		for _, w := range page {
			if r.otherCluster(w) {
				r.o.OnSkip(w.RuntimeID, w.Cluster)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("monitor: %w", err)
	}
	return nil
}

// otherCluster reports whether w was made on another cluster than this one.
func (r *reconciler) otherCluster(w store.LiveRecord) bool {
	return r.o.Cluster != "" && w.Cluster != "" && w.Cluster != r.o.Cluster
}

// applyEach applies the transitions one at a time, skipping those of runtime
// IDs no longer in the store (returned in gone).
func applyEach(ctx context.Context, st *store.Store, ts []store.Transition) (res []store.Applied, gone []string, err error) {
	for _, t := range ts {
		r, err := st.ApplyBatchNoSpecs(ctx, []store.Transition{t})
		switch {
		case errors.Is(err, store.ErrNotFound):
			if !slices.Contains(gone, t.RuntimeID) {
				gone = append(gone, t.RuntimeID)
			}
		case err != nil:
			return nil, nil, err
		default:
			res = append(res, r...)
		}
	}
	return res, gone, nil
}
