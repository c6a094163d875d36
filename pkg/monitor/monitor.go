// Package monitor turns the status of gobrave's Deployments and Jobs into
// observed events in the state database: shared, label-filtered informers
// feed pure mapping functions (JobEvent, DeploymentEvent), their handlers
// only compute and enqueue, and a single writer records the observations in
// batches through store.ApplyBatch. The store's state machine decides what
// each observation changes.
//
// Monitors of several processes share the work through the store's leases:
// an ID is observed by the process holding its lease, the others follow its
// history in the store and take the lease over when its owner stops
// renewing it.
package monitor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// Defaults of Options.
const (
	DefaultLeaseTTL    = 15 * time.Second
	DefaultSyncTimeout = 30 * time.Second
	DefaultClusterWide = 10
)

const (
	// batchSize bounds the transitions of one ApplyBatch transaction.
	batchSize = 256
	// pollInterval is how often the history is read: the new events of IDs
	// leased by another process, and the requests recorded for IDs this
	// Monitor holds.
	pollInterval = 500 * time.Millisecond
	// maxConfirm bounds the concurrent lists confirming missing objects.
	maxConfirm = 8
)

// Options configures a Monitor.
type Options struct {
	// Owner identifies this process in the leases. Give each Monitor of a
	// process its own Owner.ID: leases are per owner.
	Owner store.Owner
	// LeaseTTL is how long a lease lives without a heartbeat (default 15s);
	// leases are renewed every LeaseTTL/3.
	LeaseTTL time.Duration
	// SyncTimeout bounds the wait for an informer's cache to sync (default 30s).
	SyncTimeout time.Duration
	// Follow keeps Run going after every ID is terminal, until its context
	// is cancelled (monitor --follow, recover).
	Follow bool
	// Once makes Run a single reconcile pass: sync the informers, check
	// every leased ID once, record what was seen and return (recover --once).
	Once bool
	// ClusterWide: when more namespaces than this are in play when Run
	// starts, one cluster-wide (still label-filtered) informer per kind is
	// used instead of one per namespace (default 10).
	ClusterWide int
	// Namespaces, when the IDs come in several Adds (page by page), is the
	// number of namespaces they span in all: the choice between informers
	// per namespace and cluster-wide ones, made once on the first IDs
	// registered, counts it as well as theirs.
	Namespaces int
	// OnEvent, when set, is called from a single goroutine for every event
	// this Monitor records, and for the events another process records for
	// IDs this Monitor follows without holding their lease. It must not block
	// for long: it delays the writer.
	OnEvent func(store.Event)
}

// Summary is the outcome of Run.
type Summary struct {
	// Reattached counts the IDs watched: not terminal when registered.
	Reattached int
	// Changed counts the IDs whose state an event recorded by this Run changed.
	Changed int
	// Terminal counts the IDs found terminal or made terminal during Run.
	Terminal int
}

// Monitor watches the workloads of one cluster. Create it with New, Add IDs
// and Run it once.
type Monitor struct {
	client kubernetes.Interface
	st     *store.Store
	opts   Options

	// tunables, replaced in tests
	pollEvery  time.Duration
	getBackoff wait.Backoff // retries of a confirming list

	mu         sync.Mutex
	marked     map[string]runtimeid.ID // every ID added and not finished, by runtime ID
	pending    []string                // added, not yet registered by Run: marked's keys
	subs       map[string]*subscription
	passive    map[string]runtimeid.ID // followed through the store, leased by another process
	held       map[string]bool         // leases this Monitor holds
	retired    []string                // finished IDs whose lease is to be released
	rechecks   []*subscription         // held, a request was recorded: check the object again
	states     map[string]store.State  // last known state, by runtime ID
	changed    map[string]bool
	terminal   map[string]bool
	reattached int
	lastSeq    int64                // events up to here were polled
	seqSet     bool                 // lastSeq was read: the history is polled (not with Once)
	inflight   int                  // subscriptions being confirmed (confirmMissing)
	missing    []missing            // missing from the caches, to confirm
	podCaches  map[string]*podCache // by informer scope, "" cluster-wide
	started    bool                 // Run was called

	wake chan struct{} // Add, a finished ID or a GET done: the control loop looks again

	qmu     sync.Mutex
	qcond   *sync.Cond // signalled when the writer took the queue, or stopped
	queue   []item
	qwake   chan struct{}
	qclosed bool // the writer stopped: nothing waits for room any more

	// Owned by Run's goroutine.
	clusterWide bool
	scoped      bool                                       // clusterWide was decided
	narrowed    map[string]bool                            // kinds whose cluster-wide informer RBAC refused
	factories   map[string]informers.SharedInformerFactory // by namespace, "" cluster-wide
	informers   map[string]*informer                       // by factory namespace|kind (pod and replicaset too)
	syncCh      chan syncResult
	bg          sync.WaitGroup
	sem         chan struct{}
}

// subscription is one watched object: kind|namespace|name with the runtime
// IDs (one per runtime profile of the cluster) this Monitor leases for it.
type subscription struct {
	id          runtimeid.ID // kind, namespace and name
	ids         []string
	uid         string  // the object's UID once known
	last        obsHash // last enqueued, to skip repeats
	podLast     obsHash // last pod status enqueued (ContainerWaiting), to skip repeats
	snapshotted bool
	// outside: found by a confirming list but not by the label-filtered
	// informer (its gobrave-workload label was removed); listed again at
	// each heartbeat.
	outside bool
}

// item is one observation waiting for the writer.
type item struct {
	ids    []string
	obs    Observation // Type "" when there is only a UID to record
	setUID string      // first UID seen of the object, for the store when no event carries it
	at     time.Time
}

// New returns a Monitor of the cluster behind client recording into st.
func New(client kubernetes.Interface, st *store.Store, opts Options) *Monitor {
	if opts.LeaseTTL <= 0 {
		opts.LeaseTTL = DefaultLeaseTTL
	}
	if opts.SyncTimeout <= 0 {
		opts.SyncTimeout = DefaultSyncTimeout
	}
	if opts.ClusterWide <= 0 {
		opts.ClusterWide = DefaultClusterWide
	}
	m := &Monitor{
		client:     client,
		st:         st,
		opts:       opts,
		pollEvery:  pollInterval,
		getBackoff: wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 5},
		marked:     map[string]runtimeid.ID{},
		subs:       map[string]*subscription{},
		passive:    map[string]runtimeid.ID{},
		held:       map[string]bool{},
		states:     map[string]store.State{},
		changed:    map[string]bool{},
		terminal:   map[string]bool{},
		wake:       make(chan struct{}, 1),
		qwake:      make(chan struct{}, 1),
		factories:  map[string]informers.SharedInformerFactory{},
		informers:  map[string]*informer{},
		narrowed:   map[string]bool{},
		podCaches:  map[string]*podCache{},
		syncCh:     make(chan syncResult),
		sem:        make(chan struct{}, maxConfirm),
	}
	m.qcond = sync.NewCond(&m.qmu)
	return m
}

// Add marks the IDs for monitoring (MarkIfNotMonitoring) and returns how many
// were not marked yet. It is idempotent, and may be called before or during
// Run; an ID is unmarked when it becomes terminal, and may then be added again.
func (m *Monitor) Add(ids ...runtimeid.ID) int {
	m.mu.Lock()
	n := 0
	for _, id := range ids {
		s := id.String()
		if _, ok := m.marked[s]; ok {
			continue
		}
		m.marked[s] = id
		m.pending = append(m.pending, s)
		n++
	}
	m.mu.Unlock()
	if n > 0 {
		signal(m.wake)
	}
	return n
}

// Run monitors the added IDs. It returns when every ID is terminal (unless
// Options.Follow), after one pass (Options.Once), when an informer cannot
// sync, when the store fails, or when ctx is cancelled. Before returning it
// records every observation already queued and releases its leases.
func (m *Monitor) Run(ctx context.Context) (Summary, error) {
	m.mu.Lock()
	if m.started {
		m.mu.Unlock()
		return Summary{}, errors.New("monitor: Run was already called; create a new Monitor")
	}
	m.started = true
	m.mu.Unlock()

	// The writer and the final lease release outlive ctx: what was seen is
	// recorded even when the user interrupts.
	dbCtx := context.WithoutCancel(ctx)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()

	stopWriter := make(chan struct{})
	writerDone := make(chan error, 1)
	go func() { writerDone <- m.writeLoop(dbCtx, stopWriter) }()

	heartbeat := time.NewTicker(m.opts.LeaseTTL / 3)
	defer heartbeat.Stop()

	writerExited, err := m.control(runCtx, heartbeat.C, writerDone)

	// Shutdown: stop informers and GETs, record what is queued, release.
	cancel()
	m.bg.Wait()
	m.shutdownInformers()
	close(stopWriter)
	if !writerExited {
		if werr := <-writerDone; werr != nil {
			err = errors.Join(err, werr)
		}
	}
	m.mu.Lock()
	held := make([]string, 0, len(m.held))
	for id := range m.held {
		held = append(held, id)
	}
	sum := Summary{Reattached: m.reattached, Changed: len(m.changed), Terminal: len(m.terminal)}
	m.mu.Unlock()
	if len(held) > 0 {
		rctx, rcancel := context.WithTimeout(dbCtx, 5*time.Second)
		if rerr := m.st.ReleaseLeases(rctx, m.opts.Owner, held...); rerr != nil {
			err = errors.Join(err, fmt.Errorf("release monitor leases: %w", rerr))
		}
		rcancel()
	}
	if err == nil && ctx.Err() != nil && !m.opts.Follow {
		err = ctx.Err()
	}
	return sum, err
}

// control is Run's loop: it registers added IDs, starts informers, reacts to
// their sync, renews and takes over leases, and decides when Run is done.
func (m *Monitor) control(ctx context.Context, heartbeat <-chan time.Time, writerDone <-chan error) (writerExited bool, err error) {
	for {
		if ctx.Err() != nil {
			return false, nil
		}
		if err := m.register(ctx); err != nil {
			return false, err
		}
		m.confirmMissing(ctx)
		if m.finished() {
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, nil
		case <-m.wake:
			if err := m.releaseRetired(ctx); err != nil {
				return false, err
			}
			m.recheckRequested(ctx)
		case r := <-m.syncCh:
			if r.inf.aux {
				if err := m.podSynced(ctx, r); err != nil {
					return false, err
				}
				continue
			}
			if r.err != nil && r.inf.namespace == "" && apierrors.IsForbidden(r.err) {
				if err := m.narrow(ctx, r.inf); err != nil {
					return false, err
				}
				continue
			}
			if r.err != nil {
				return false, r.err
			}
			r.inf.synced = true
			m.snapshotAll(ctx, r.inf)
		case err := <-writerDone:
			if err == nil {
				err = errors.New("monitor: the writer stopped unexpectedly")
			}
			return true, err
		case <-heartbeat:
			if err := m.heartbeat(ctx); err != nil {
				return false, err
			}
		}
	}
}

// finished reports whether Run is done: every ID terminal (without Follow),
// or, with Once, every leased ID checked and nothing in flight.
func (m *Monitor) finished() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.pending) > 0 {
		return false
	}
	if m.opts.Once {
		if m.inflight > 0 {
			return false
		}
		for _, inf := range m.informers {
			if inf.aux && !inf.synced {
				return false // the pods' status is not read yet
			}
		}
		for _, s := range m.subs {
			if !s.snapshotted {
				return false
			}
		}
		return true
	}
	return !m.opts.Follow && len(m.marked) == 0
}

// register reads the pending IDs' records, leases what it can and subscribes.
func (m *Monitor) register(ctx context.Context) error {
	m.mu.Lock()
	ids := m.pending
	m.pending = nil
	m.mu.Unlock()
	if len(ids) == 0 {
		return nil
	}
	if !m.scoped {
		// Decided once, on the first IDs: informers are not moved later.
		m.scoped = true
		nss := map[string]bool{}
		m.mu.Lock()
		for _, s := range ids {
			if id, ok := m.marked[s]; ok {
				nss[id.Namespace] = true
			}
		}
		m.mu.Unlock()
		m.clusterWide = max(len(nss), m.opts.Namespaces) > m.opts.ClusterWide
	}

	if !m.opts.Once {
		if err := m.pollFrom(ctx); err != nil {
			return err
		}
	}
	// The IDs are marked's keys: the maps that follow (leases, states,
	// subscriptions) share these strings instead of copies of their own.
	live, uids, err := m.liveRecords(ctx, ids)
	if err != nil {
		return err
	}
	if len(live) == 0 {
		return nil
	}
	leased, err := m.st.AcquireLeases(ctx, m.opts.Owner, live, m.opts.LeaseTTL)
	if err != nil {
		return fmt.Errorf("monitor: %w", err)
	}
	isLeased := make(map[string]bool, len(leased))
	for _, s := range leased {
		isLeased[s] = true
	}
	leased = leased[:0]
	for _, s := range live {
		if isLeased[s] {
			leased = append(leased, s) // live's strings, not the store's copies
		}
	}

	m.mu.Lock()
	for _, s := range live {
		id, ok := m.marked[s]
		if !ok {
			continue
		}
		switch {
		case isLeased[s]:
			m.reattached++
		case m.opts.Once:
			// Another process watches it: not ours to check.
			delete(m.marked, s)
			continue
		default:
			m.reattached++
			m.passive[s] = id
		}
	}
	m.mu.Unlock()
	return m.subscribe(ctx, leased, uids)
}

// pollFrom sets where the polling of the history starts: the newest event
// before the first records are read, so that whatever is recorded after
// them is polled. Called by the control loop only.
func (m *Monitor) pollFrom(ctx context.Context) error {
	m.mu.Lock()
	set := m.seqSet
	m.mu.Unlock()
	if set {
		return nil
	}
	last, err := m.st.LastEventSeq(ctx)
	if err != nil {
		return fmt.Errorf("monitor: %w", err)
	}
	m.mu.Lock()
	m.lastSeq, m.seqSet = last, true
	m.mu.Unlock()
	return nil
}

// subscribe adds the leased IDs to the subscriptions, starts the informers
// they need and checks the objects already in a synced cache.
func (m *Monitor) subscribe(ctx context.Context, leased []string, uids map[string]string) error {
	var fresh []*subscription
	m.mu.Lock()
	for _, s := range leased {
		id, ok := m.marked[s]
		if !ok {
			continue
		}
		m.held[s] = true
		delete(m.passive, s)
		key := id.Key()
		sub := m.subs[key]
		if sub == nil {
			sub = &subscription{id: id}
			m.subs[key] = sub
		}
		if !slices.Contains(sub.ids, s) {
			sub.ids = append(sub.ids, s)
			// Check the object (again) for the new ID: its record may be
			// behind what was already reported for the other IDs.
			sub.snapshotted, sub.last, sub.podLast = false, 0, 0
			if !slices.Contains(fresh, sub) {
				fresh = append(fresh, sub)
			}
		}
		if sub.uid == "" {
			sub.uid = uids[s]
		}
	}
	m.mu.Unlock()

	for _, sub := range fresh {
		inf, err := m.informerFor(ctx, sub.id.Namespace, sub.id.Kind)
		if err != nil {
			return err
		}
		if inf.synced {
			m.snapshot(ctx, inf, sub)
		}
	}
	return nil
}

// heartbeat renews this Monitor's leases and tries to take over the IDs
// followed through the store (their owner may be gone).
func (m *Monitor) heartbeat(ctx context.Context) error {
	m.mu.Lock()
	anyHeld := len(m.held) > 0
	others := make([]string, 0, len(m.passive))
	for s := range m.passive {
		others = append(others, s)
	}
	m.mu.Unlock()
	if anyHeld {
		if err := m.st.RenewLeases(ctx, m.opts.Owner); err != nil && ctx.Err() == nil {
			return fmt.Errorf("monitor: %w", err)
		}
	}
	m.recheckOutside()
	if len(others) == 0 {
		return nil
	}
	slices.Sort(others)
	taken, err := m.st.AcquireLeases(ctx, m.opts.Owner, others, m.opts.LeaseTTL)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("monitor: %w", err)
	}
	if len(taken) == 0 {
		return nil
	}
	m.mu.Lock()
	for _, s := range taken {
		m.held[s] = true
	}
	m.mu.Unlock()
	// Read the records again: the previous owner may have moved them on.
	live, uids, err := m.liveRecords(ctx, taken)
	if err != nil {
		return err
	}
	return m.subscribe(ctx, live, uids)
}

// releaseRetired releases the leases of the IDs the writer finished, in one
// transaction for all those finished since the last call (not on the
// writer's path).
func (m *Monitor) releaseRetired(ctx context.Context) error {
	m.mu.Lock()
	ids := m.retired
	m.retired = nil
	m.mu.Unlock()
	if len(ids) == 0 {
		return nil
	}
	if err := m.st.ReleaseLeases(ctx, m.opts.Owner, ids...); err != nil {
		if ctx.Err() != nil {
			return nil // released on the way out
		}
		return fmt.Errorf("monitor: %w", err)
	}
	m.mu.Lock()
	for _, id := range ids {
		delete(m.held, id)
	}
	m.mu.Unlock()
	return nil
}

// recheckRequested checks again in the informer's cache the objects of the
// held IDs for which the writer's poll found a request (see follow). An
// informer not synced yet checks them when it is.
func (m *Monitor) recheckRequested(ctx context.Context) {
	m.mu.Lock()
	subs := m.rechecks
	m.rechecks = nil
	m.mu.Unlock()
	for _, sub := range subs {
		if inf := m.informers[m.informerKey(sub.id.Namespace, sub.id.Kind)]; inf != nil && inf.synced {
			m.snapshot(ctx, inf, sub)
		}
	}
}

// finish unmarks a runtime ID: it is terminal (counted) or gone from the store.
// It drops the ID's subscription; its lease, if held, is released by the
// control loop.
func (m *Monitor) finish(s string, terminal bool) {
	m.mu.Lock()
	m.finishLocked(s, terminal)
	m.mu.Unlock()
	signal(m.wake)
}

func (m *Monitor) finishLocked(s string, terminal bool) {
	if terminal {
		m.terminal[s] = true
	}
	id, ok := m.marked[s]
	if !ok {
		return
	}
	if m.held[s] {
		m.retired = append(m.retired, s)
	}
	delete(m.marked, s)
	delete(m.passive, s)
	key := id.Key()
	if sub := m.subs[key]; sub != nil {
		sub.ids = slices.DeleteFunc(sub.ids, func(x string) bool { return x == s })
		if len(sub.ids) == 0 {
			delete(m.subs, key)
		}
	}
}

// maxQueue bounds the observations the informers' handlers queue for the
// writer (onObject, onPod wait for room): when 100,000 objects arrive faster
// than the database records them, the backlog stays in the informers' own
// buffers, as a pointer to each cached object, not as items of ~200 bytes.
const maxQueue = 4 * batchSize

// enqueue hands observations to the writer; it never blocks for long.
func (m *Monitor) enqueue(items ...item) {
	if len(items) == 0 {
		return
	}
	m.qmu.Lock()
	m.queue = append(m.queue, items...)
	m.qmu.Unlock()
	signal(m.qwake)
}

// enqueueWait is enqueue for the informers' handlers: it first waits while
// maxQueue items wait for the writer (unless the writer stopped).
func (m *Monitor) enqueueWait(items ...item) {
	if len(items) == 0 {
		return
	}
	m.qmu.Lock()
	for len(m.queue) >= maxQueue && !m.qclosed {
		m.qcond.Wait()
	}
	m.queue = append(m.queue, items...)
	m.qmu.Unlock()
	signal(m.qwake)
}

// signal wakes the reader of a one-slot channel without blocking.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// informerShutdownWait bounds how long Run waits for the informers to stop.
// client-go's reflector sleeps out its retry backoff (up to 30 s) without
// looking at its context when a watch-list request fails, so after a
// stretch of connection errors a full wait could add that much to the exit
// of a command that has already failed. The handlers never block (enqueue
// only appends), so an informer that stops later does no harm.
const informerShutdownWait = 500 * time.Millisecond

// shutdownInformers stops every informer factory and waits for them, at most
// informerShutdownWait.
func (m *Monitor) shutdownInformers() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, f := range m.factories {
			f.Shutdown()
		}
	}()
	timer := time.NewTimer(informerShutdownWait)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
	}
}

// informer is one started shared informer (a kind in a namespace, or in all).
type informer struct {
	namespace string // "" for all namespaces
	kind      string
	inf       cache.SharedIndexInformer
	reg       cache.ResourceEventHandlerRegistration // the Monitor's handler
	stop      context.CancelFunc                     // stops this informer alone
	synced    bool                                   // set by the control loop
	aux       bool                                   // a pod or ReplicaSet informer (pods.go)

	errMu   sync.Mutex
	lastErr error // the last list/watch error, for the sync timeout message

	// lastObject is when the informer last received an object (UnixNano),
	// or when its sync wait began: waitSynced's progress.
	lastObject atomic.Int64
}

// transform is the informer's transform (compact), marking progress: it
// runs on each object as it arrives, before the cache.
func (inf *informer) transform(obj any) (any, error) {
	inf.touch()
	return compact(obj)
}

func (inf *informer) touch() { inf.lastObject.Store(time.Now().UnixNano()) }

// quiet is the time since the informer last received an object.
func (inf *informer) quiet() time.Duration {
	return time.Since(time.Unix(0, inf.lastObject.Load()))
}

func (inf *informer) setLastErr(err error) {
	inf.errMu.Lock()
	inf.lastErr = err
	inf.errMu.Unlock()
}

func (inf *informer) getLastErr() error {
	inf.errMu.Lock()
	defer inf.errMu.Unlock()
	return inf.lastErr
}

// liveRecords reads the records of ids: those not recorded (or removed) and
// those already terminal are finished; the rest come back with their UIDs.
func (m *Monitor) liveRecords(ctx context.Context, ids []string) (live []string, uids map[string]string, err error) {
	uids = make(map[string]string, len(ids))
	recs, err := m.st.Records(ctx, ids) // one query per 500 IDs, no specs decoded
	if err != nil {
		return nil, nil, fmt.Errorf("monitor: %w", err)
	}
	for _, s := range ids {
		w, ok := recs[s]
		if !ok {
			m.finish(s, false)
			continue
		}
		m.mu.Lock()
		m.states[s] = w.State
		m.mu.Unlock()
		if w.State.Terminal() {
			m.finish(s, true)
			continue
		}
		live = append(live, s)
		uids[s] = w.UID
	}
	return live, uids, nil
}
