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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

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
	// OnEvent, when set, is called for every event this Monitor records,
	// and for the events another process records for IDs this Monitor
	// follows without holding their lease, by one goroutine at a time (the
	// writer, or the history poll). It must not block for long: it delays
	// the writer.
	OnEvent func(store.Event)
	// Warn, when set, is told in one line when an informer cannot list or
	// watch and retries: once, then at most once a minute while it keeps
	// failing (runtime.WatchWarnings). Unset, client-go logs each failure.
	// Called from the informers' goroutines: it must be safe for
	// concurrent use. The text carries the server's error: untrusted.
	Warn func(string)
}

// Summary is the outcome of Run.
type Summary struct {
	// Reattached counts the IDs watched: not terminal when registered.
	Reattached int
	// Changed counts the IDs whose state an event recorded by this Run changed.
	Changed int
	// Terminal counts the IDs found terminal or made terminal during Run.
	// Like Reattached, Changed and Terminal count an ID once each time it
	// is added: nothing is kept of an ID once it is finished.
	Terminal int
}

// Monitor watches the workloads of one cluster. Create it with New, Add IDs
// and Run it once.
type Monitor struct {
	client kubernetes.Interface
	st     *store.Store
	opts   Options

	// tunables, replaced in tests
	pollEvery     time.Duration
	getBackoff    wait.Backoff   // retries of a confirming list
	beforePoll    func()         // called before each history poll (tests)
	onRelease     func([]string) // called with each chunk Run releases on its way out (tests)
	releaseChunk  int            // leases released a transaction on the way out
	onAcquire     func([]string) // called with the IDs of each AcquireLeases of register (tests)
	registerChunk int            // IDs registered (records read, leases taken) at a time

	onEventMu sync.Mutex // OnEvent is called by one goroutine at a time

	mu sync.Mutex
	// subs is every ID added and not finished, by runtime ID: one
	// subscription each (its lease, state and repeat filters), the only
	// per-ID state of a Monitor (one slot of a table, one struct, one string).
	subs       subSet
	runtimes   []string        // the runtime names of the IDs added (k8s, k3s): the prefixes of subs' keys
	nHeld      int             // subscriptions holding their lease (flagHeld)
	nPassive   int             // subscriptions followed through the store (flagPassive)
	nOutside   int             // subscriptions found outside the informers' label filter (flagOutside)
	nChanged   int             // Summary.Changed
	nTerminal  int             // Summary.Terminal
	pending    []string        // added, not yet registered by Run: subs' keys
	retired    []string        // finished IDs whose lease is to be released
	rechecks   []*subscription // held, a request was recorded: check the object again
	reattached int
	lastSeq    int64                // events up to here were polled
	seqSet     bool                 // lastSeq was read: the history is polled (not with Once)
	inflight   int                  // subscriptions being confirmed (confirmMissing)
	missing    []missing            // missing from the caches, to confirm
	passes     int                  // snapshotAll passes running (confirmMissing waits)
	podCaches  map[string]*podCache // by informer scope, "" cluster-wide
	started    bool                 // Run was called
	// wstores are the workload informers' stores by informer key (scope|kind):
	// where a finished subscription's cache entry goes (unhostLocked), and
	// where an added one finds its object's (Add).
	wstores map[string]*wstore

	wake chan struct{} // Add, a finished ID or a GET done: the control loop looks again

	qmu     sync.Mutex
	qcond   *sync.Cond // signalled when the writer took the queue, or stopped
	queue   []item
	qwake   chan struct{}
	qclosed bool // the writer stopped: nothing waits for room any more

	// Owned by the writer (writeLoop).
	failHolds []*failHold // job failures waiting for their failed pod (failhold.go)

	// Owned by Run's goroutine.
	clusterWide bool
	scoped      bool                                       // clusterWide was decided
	narrowed    map[string]bool                            // kinds whose cluster-wide informer RBAC refused
	factories   map[string]informers.SharedInformerFactory // by namespace, "" cluster-wide
	informers   map[string]*informer                       // by factory namespace|kind (pod and replicaset too)
	ctrls       sync.WaitGroup                             // the workload informers' controllers (wstore)
	syncCh      chan syncResult
	bg          sync.WaitGroup
	sem         chan struct{}
}

// subscription is one runtime ID added to the Monitor, from Add until it
// is finished (terminal, or gone from the store): marked, then followed
// through the store (flagPassive) or leased and watched (flagHeld,
// flagWatched). It is all a Monitor keeps per ID: 96 bytes with its
// object's workload cache entry, its ID string and a map entry. Its kind,
// namespace and name are read from the ID (substrings, no copies). Two
// runtime IDs of one object (two runtime profiles of one cluster) are two
// subscriptions, each with its own repeat filters and UID; one of them
// hosts the cache entry.
type subscription struct {
	id  string // <runtime>-<namespace>|<kind>|<name>: the key in Monitor.subs
	uid string // the object's UID once known (the record's, then the cache's string)
	// obs and pod are the repeat filters, each a 56-bit hash (obsHash) in
	// its low bits, 0 none: of the last observation enqueued, and of the
	// last pod status enqueued (ContainerWaiting). Their top bytes hold
	// the record's state (obs) and the flags (pod): 48 bytes a
	// subscription instead of 64 (the next size class), 1.6 MB at 100,000.
	obs, pod uint64
	// e is the object's entry in the workload informer's cache when
	// e.hosted (wstore, subsHost), guarded by mu like the rest: one struct
	// per ID instead of a subscription, a wentry and a wstore map entry
	// (about 35 bytes less per ID).
	e wentry
}

// hashBits masks a subscription word's hash; the top byte is the rest.
const hashBits = 1<<56 - 1

// last and podLast are the repeat filters' hashes.
func (s *subscription) last() obsHash    { return obsHash(s.obs & hashBits) }
func (s *subscription) podLast() obsHash { return obsHash(s.pod & hashBits) }

func (s *subscription) setLast(h obsHash)    { s.obs = s.obs&^hashBits | uint64(h)&hashBits }
func (s *subscription) setPodLast(h obsHash) { s.pod = s.pod&^hashBits | uint64(h)&hashBits }

// state is the record's last known state.
func (s *subscription) state() stateCode { return stateCode(s.obs >> 56) }

func (s *subscription) setState(c stateCode) { s.obs = s.obs&hashBits | uint64(c)<<56 }

func (s *subscription) flags() subFlags { return subFlags(s.pod >> 56) }

// subFlags are the booleans of a subscription.
type subFlags uint8

const (
	flagHeld        subFlags = 1 << iota // this Monitor holds the ID's lease
	flagPassive                          // leased by another process: followed through the store
	flagWatched                          // leased and subscribed: the informers' events are mapped
	flagSnapshotted                      // checked in the synced cache since (re)subscribed
	// flagOutside: found by a confirming list but not by the label-filtered
	// informer (its gobrave-workload label was removed); listed again at
	// each heartbeat.
	flagOutside
	flagChanged // counted in Summary.Changed
)

func (s *subscription) has(f subFlags) bool { return s.flags()&f != 0 }

// set turns f on or off.
func (s *subscription) set(f subFlags, on bool) {
	fl := s.flags()
	if on {
		fl |= f
	} else {
		fl &^= f
	}
	s.pod = s.pod&hashBits | uint64(fl)<<56
}

// parts are the namespace, kind and name of the subscription's ID.
func (s *subscription) parts() (ns, kind, name string) { return idParts(s.id) }

// idParts splits a runtime ID <runtime>-<namespace>|<kind>|<name> into
// substrings of it (runtimeid.Parse validates; IDs are validated when added).
func idParts(id string) (ns, kind, name string) {
	_, rest, _ := strings.Cut(id, "-")
	ns, rest, _ = strings.Cut(rest, "|")
	kind, name, _ = strings.Cut(rest, "|")
	return ns, kind, name
}

// stateCode is a store.State in one byte: every subscription keeps its
// record's last known state.
type stateCode uint8

var stateCodes = []store.State{"", store.StateCreated, store.StateStarting, store.StateRunning, store.StatePaused,
	store.StateStopping, store.StateExited, store.StateFailed, store.StateDeleted}

// codeOf is the code of st; 0 for a state this code does not know.
func codeOf(st store.State) stateCode {
	for i, s := range stateCodes {
		if s == st && i > 0 {
			return stateCode(i)
		}
	}
	return 0
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
		client:        client,
		st:            st,
		opts:          opts,
		pollEvery:     pollInterval,
		releaseChunk:  releaseChunk,
		registerChunk: registerChunk,
		getBackoff:    wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 5},
		subs:          newSubSet(),
		wake:          make(chan struct{}, 1),
		qwake:         make(chan struct{}, 1),
		factories:     map[string]informers.SharedInformerFactory{},
		informers:     map[string]*informer{},
		narrowed:      map[string]bool{},
		podCaches:     map[string]*podCache{},
		wstores:       map[string]*wstore{},
		syncCh:        make(chan syncResult),
		sem:           make(chan struct{}, maxConfirm),
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
		if m.subs.get(s) != nil {
			continue
		}
		if !slices.Contains(m.runtimes, id.Runtime) {
			m.runtimes = append(m.runtimes, strings.Clone(id.Runtime))
		}
		sub := &subscription{id: s}
		m.subs.put(sub)
		m.adoptCachedLocked(sub)
		m.pending = append(m.pending, s)
		n++
	}
	m.mu.Unlock()
	if n > 0 {
		signal(m.wake)
	}
	return n
}

// Has reports whether the runtime ID id is added and not finished: Add
// would ignore it.
func (m *Monitor) Has(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	ok := m.subs.get(id) != nil
	return ok
}

// lookupLocked is the subscription of runtime rt for the object kind
// namespace/name, or nil: the key is built in a buffer, not allocated.
func (m *Monitor) lookupLocked(rt, ns, kind, name string) *subscription {
	var buf [192]byte
	b := append(buf[:0], rt...)
	b = append(b, '-')
	b = append(b, ns...)
	b = append(b, '|')
	b = append(b, kind...)
	b = append(b, '|')
	b = append(b, name...)
	return m.subs.getBytes(b)
}

// watchedLocked calls fn with each watched subscription of the object kind
// namespace/name (one per runtime profile of the cluster that has it).
func (m *Monitor) watchedLocked(ns, kind, name string, fn func(*subscription)) {
	for _, rt := range m.runtimes {
		if sub := m.lookupLocked(rt, ns, kind, name); sub != nil && sub.has(flagWatched) {
			fn(sub)
		}
	}
}

// setHeldLocked and setPassiveLocked change a subscription's lease flags,
// keeping their counts.
func (m *Monitor) setHeldLocked(sub *subscription, on bool) {
	if sub.has(flagHeld) != on {
		sub.set(flagHeld, on)
		if on {
			m.nHeld++
		} else {
			m.nHeld--
		}
	}
}

func (m *Monitor) setPassiveLocked(sub *subscription, on bool) {
	if sub.has(flagPassive) != on {
		sub.set(flagPassive, on)
		if on {
			m.nPassive++
		} else {
			m.nPassive--
		}
	}
}

// setOutsideLocked sets or clears flagOutside, keeping nOutside: the
// heartbeat scans the subscriptions for it only when some have it (the scan
// holds m.mu, which every informer handler takes, for 10-60 ms at 100,000).
func (m *Monitor) setOutsideLocked(sub *subscription, on bool) {
	if sub.has(flagOutside) != on {
		sub.set(flagOutside, on)
		if on {
			m.nOutside++
		} else {
			m.nOutside--
		}
	}
}

// recordedLocked notes what the store says of id after the writer applied
// an observation (applied: it changed the record) and finishes the ID when
// its record is terminal. It reports whether it finished it.
func (m *Monitor) recordedLocked(id string, applied bool, st store.State) bool {
	sub := m.subs.get(id)
	if sub == nil {
		return false
	}
	c := codeOf(st)
	if applied && (c == 0 || c != sub.state()) && !sub.has(flagChanged) {
		sub.set(flagChanged, true)
		m.nChanged++
	}
	sub.setState(c)
	if st.Terminal() {
		m.finishLocked(id, true)
		return true
	}
	return false
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
	// The history poll, beside the writer; it stops with the control loop.
	pollCtx, stopPoll := context.WithCancel(dbCtx)
	var polling sync.WaitGroup
	polling.Go(func() { m.pollLoop(pollCtx) })

	heartbeat := time.NewTicker(m.opts.LeaseTTL / 3)
	defer heartbeat.Stop()

	writerExited, err := m.control(runCtx, heartbeat.C, writerDone)

	// Shutdown: stop the poll, informers and GETs, record what is queued,
	// release.
	cancel()
	stopPoll()
	polling.Wait()
	m.bg.Wait()
	m.shutdownInformers()
	close(stopWriter)
	if !writerExited {
		if werr := <-writerDone; werr != nil {
			err = errors.Join(err, werr)
		}
	}
	m.mu.Lock()
	held := make([]string, 0, len(m.retired)+m.nHeld)
	held = append(held, m.retired...)
	for sub := range m.subs.all() {
		id := sub.id
		if sub.has(flagHeld) {
			held = append(held, id)
		}
	}
	sum := Summary{Reattached: m.reattached, Changed: m.nChanged, Terminal: m.nTerminal}
	m.mu.Unlock()
	if len(held) > 0 {
		rctx, rcancel := context.WithTimeout(dbCtx, 5*time.Second)
		// releaseChunk IDs a transaction: one ReleaseLeases of the 100,000
		// IDs of a monitor --all (a 4 MB JSON array, parsed by SQLite, and
		// 100,000 deletes in one transaction) took the process's RSS from
		// 58 to 91 MB on its way out, above its peak while monitoring.
		for chunk := range slices.Chunk(held, m.releaseChunk) {
			if m.onRelease != nil {
				m.onRelease(chunk)
			}
			if rerr := m.st.ReleaseLeases(rctx, m.opts.Owner, chunk...); rerr != nil {
				err = errors.Join(err, fmt.Errorf("release monitor leases: %w", rerr))
				break
			}
		}
		rcancel()
	}
	if err == nil && ctx.Err() != nil && !m.opts.Follow {
		err = ctx.Err()
	}
	return sum, err
}

// releaseChunk is how many leases Run releases a transaction on its way
// out (Monitor.releaseChunk).
const releaseChunk = 2048

// registerChunk is how many pending IDs register takes at a time
// (Monitor.registerChunk): their records read, their leases taken in one
// transaction, and those leased subscribed.
const registerChunk = 2048

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
			if v := klog.V(traceLevel); v.Enabled() {
				v.InfoS("monitor: informer synced", "kind", r.inf.kind, "namespace", r.inf.namespace, "objects", r.inf.ws.len())
			}
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
		for s := range m.subs.all() {
			if s.has(flagWatched) && !s.has(flagSnapshotted) {
				return false
			}
		}
		return true
	}
	return !m.opts.Follow && m.subs.len() == 0
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
		for _, s := range ids {
			ns, _, _ := idParts(s)
			nss[ns] = true
		}
		m.clusterWide = max(len(nss), m.opts.Namespaces) > m.opts.ClusterWide
	}

	if !m.opts.Once {
		if err := m.pollFrom(ctx); err != nil {
			return err
		}
	}
	// registerChunk IDs at a time: the IDs of a monitor --all arrive faster
	// than they are registered, so one call may have tens of thousands of
	// them, and their leases in one AcquireLeases are a JSON array of every
	// ID parsed by SQLite (4 MB at 100,000), every row written in one
	// transaction, and a map and a copy of every ID on each side: the
	// mirror of the exit's ReleaseLeases (releaseChunk).
	if v := klog.V(traceLevel); v.Enabled() {
		v.InfoS("monitor: registering", "ids", len(ids))
	}
	for chunk := range slices.Chunk(ids, m.registerChunk) {
		if err := m.registerChunkOf(ctx, chunk); err != nil {
			return err
		}
	}
	return nil
}

// registerChunkOf is register's work on one chunk of the pending IDs.
func (m *Monitor) registerChunkOf(ctx context.Context, ids []string) error {
	// The IDs are subs' keys: the lists that follow (leases, rechecks)
	// share these strings instead of copies of their own.
	live, err := m.liveRecords(ctx, ids)
	if err != nil {
		return err
	}
	if len(live) == 0 {
		return nil
	}
	if m.onAcquire != nil {
		m.onAcquire(live)
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
		sub := m.subs.get(s)
		if sub == nil {
			continue
		}
		switch {
		case isLeased[s]:
			m.reattached++
		case m.opts.Once:
			// Another process watches it: not ours to check.
			m.unhostLocked(sub)
			m.subs.del(s)
			continue
		default:
			m.reattached++
			m.setPassiveLocked(sub, true)
		}
	}
	m.mu.Unlock()
	return m.subscribe(ctx, leased)
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

// subscribe watches the leased IDs: it starts the informers they need and
// checks the objects already in a synced cache.
func (m *Monitor) subscribe(ctx context.Context, leased []string) error {
	var fresh []*subscription
	m.mu.Lock()
	for _, s := range leased {
		sub := m.subs.get(s)
		if sub == nil {
			m.retired = append(m.retired, s) // finished meanwhile: release it
			continue
		}
		m.setHeldLocked(sub, true)
		m.setPassiveLocked(sub, false)
		if !sub.has(flagWatched) {
			// Check the object (again): its record may be behind what the
			// informer already reported.
			sub.set(flagWatched, true)
			sub.set(flagSnapshotted, false)
			sub.setLast(0)
			sub.setPodLast(0)
			fresh = append(fresh, sub)
		}
	}
	m.mu.Unlock()

	for _, sub := range fresh {
		ns, kind, _ := sub.parts()
		inf, err := m.informerFor(ctx, ns, kind)
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
	anyHeld := m.nHeld+len(m.retired) > 0
	others := make([]string, 0, m.nPassive)
	if m.nPassive > 0 {
		for sub := range m.subs.all() {
			s := sub.id
			if sub.has(flagPassive) {
				others = append(others, s)
			}
		}
	}
	m.mu.Unlock()
	start := time.Now()
	if anyHeld {
		if err := m.st.RenewLeases(ctx, m.opts.Owner); err != nil && ctx.Err() == nil {
			return fmt.Errorf("monitor: %w", err)
		}
	}
	renewed := time.Now()
	m.recheckOutside()
	if v := klog.V(traceLevel); v.Enabled() {
		v.InfoS("monitor: heartbeat", "renewMs", ms(renewed.Sub(start)), "outsideMs", ms(time.Since(renewed)), "held", m.heldCount())
	}
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
	// others' strings (subs' keys), not the store's copies
	isTaken := make(map[string]bool, len(taken))
	for _, s := range taken {
		isTaken[s] = true
	}
	taken = taken[:0]
	m.mu.Lock()
	for _, s := range others {
		if !isTaken[s] {
			continue
		}
		taken = append(taken, s)
		if sub := m.subs.get(s); sub != nil {
			m.setHeldLocked(sub, true)
		} else {
			m.retired = append(m.retired, s)
		}
	}
	m.mu.Unlock()
	// Read the records again: the previous owner may have moved them on.
	live, err := m.liveRecords(ctx, taken)
	if err != nil {
		return err
	}
	return m.subscribe(ctx, live)
}

// heldCount is the number of leases held, for the trace.
func (m *Monitor) heldCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.nHeld
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
		if sub := m.subs.get(id); sub != nil {
			m.setHeldLocked(sub, false)
		}
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
		ns, kind, _ := sub.parts()
		if inf := m.informers[m.informerKey(ns, kind)]; inf != nil && inf.synced {
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
	sub := m.subs.get(s)
	if sub == nil {
		return
	}
	if terminal {
		m.nTerminal++
	}
	if sub.has(flagHeld) {
		m.retired = append(m.retired, s)
	}
	m.setHeldLocked(sub, false)
	m.setPassiveLocked(sub, false)
	m.setOutsideLocked(sub, false)
	sub.set(flagWatched, false)
	m.unhostLocked(sub)
	m.subs.del(s)
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
		m.ctrls.Wait()
	}()
	timer := time.NewTimer(informerShutdownWait)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
	}
}

// informer is one started informer (a kind in a namespace, or in all): a
// workload kind's wstore, or a pod or ReplicaSet shared informer.
type informer struct {
	namespace string // "" for all namespaces
	kind      string
	inf       cache.SharedIndexInformer              // a pod or ReplicaSet informer's
	ws        *wstore                                // a workload informer's store and event source
	reg       cache.ResourceEventHandlerRegistration // the Monitor's handler
	stop      context.CancelFunc                     // stops this informer alone
	synced    bool                                   // set by the control loop
	aux       bool                                   // a pod or ReplicaSet informer (pods.go)
	// shareUID, of a workload informer, is the string its objects keep
	// as their UID (Monitor.uidFor): the subscription's, when equal.
	shareUID func(ns, name, uid string) string

	errMu   sync.Mutex
	lastErr error // the last list/watch error, for the sync timeout message

	// lastObject is when the informer last received an object (UnixNano),
	// or when its sync wait began: waitSynced's progress.
	lastObject atomic.Int64
}

// transform is the informer's transform (compact), marking progress: it
// runs on each object as it arrives, before the cache. A workload's UID
// becomes its subscription's string when the two are equal (shareUID).
func (inf *informer) transform(obj any) (any, error) {
	inf.touch()
	t, err := compact(obj)
	if c, ok := t.(*compacted); ok && err == nil && inf.shareUID != nil {
		c.uid = inf.shareUID(c.namespace, c.name, c.uid)
	}
	return t, err
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
// those already terminal are finished; the rest come back, their
// subscriptions holding the record's state and UID.
//
// The records are read recordsPage IDs at a time (one query each, no specs
// decoded) and not kept: the first registration of a following monitor
// gets every ID at once (100,000 at N = 100,000), whose records read in one
// map took ~180 bytes each of peak heap.
func (m *Monitor) liveRecords(ctx context.Context, ids []string) (live []string, err error) {
	for chunk := range slices.Chunk(ids, recordsPage) {
		if live, err = m.liveRecordsPage(ctx, chunk, live); err != nil {
			return nil, err
		}
	}
	return live, nil
}

// recordsPage is how many records liveRecords reads at a time.
const recordsPage = 500

// liveRecordsPage is liveRecords of one page of IDs, appended to live.
func (m *Monitor) liveRecordsPage(ctx context.Context, ids []string, live []string) ([]string, error) {
	recs, err := m.st.Records(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("monitor: %w", err)
	}
	for _, s := range ids {
		w, ok := recs[s]
		if !ok {
			m.finish(s, false)
			continue
		}
		m.mu.Lock()
		if sub := m.subs.get(s); sub != nil {
			sub.setState(codeOf(w.State))
			switch {
			case sub.uid != "":
			case sub.e.hosted && sub.e.uid == w.UID:
				// Its object was cached first (monitor --all lists
				// faster than it registers): the cache's string, not
				// a copy of the record's as well (48 bytes an ID).
				sub.uid = sub.e.uid
			default:
				sub.uid = w.UID
			}
		}
		m.mu.Unlock()
		if w.State.Terminal() {
			m.finish(s, true)
			continue
		}
		live = append(live, s)
	}
	return live, nil
}
