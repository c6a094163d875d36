package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gobrave/kubectl-gobrave/pkg/monitor"
	"github.com/gobrave/kubectl-gobrave/pkg/runtime"
	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// Condition is what wait and --wait block on.
type Condition string

// Conditions.
const (
	ConditionStarted  Condition = "started"
	ConditionExited   Condition = "exited"
	ConditionPaused   Condition = "paused"
	ConditionFailed   Condition = "failed"
	ConditionDeleted  Condition = "deleted"
	ConditionTerminal Condition = "terminal"
)

// Conditions lists the valid --for values.
var Conditions = []Condition{ConditionStarted, ConditionExited, ConditionPaused, ConditionFailed, ConditionDeleted, ConditionTerminal}

// check tells whether w meets c (ok) or can no longer meet it (impossible).
func (c Condition) check(w store.Workload) (ok, impossible bool) {
	switch c {
	case ConditionStarted:
		switch {
		case w.State == store.StateRunning:
			return true, false
		case w.State == store.StateExited && w.Kind == runtimeid.KindJob && !w.Stopped():
			// A job that exited 0 has started and finished.
			return true, false
		case w.State.Terminal():
			return false, true
		}
	case ConditionExited:
		switch w.State {
		case store.StateExited:
			return true, false
		case store.StateFailed, store.StateDeleted:
			return false, true
		}
	case ConditionPaused:
		switch {
		case w.State == store.StatePaused:
			return true, false
		case w.State == store.StateExited && w.Request == store.PauseRequested:
			// A kind whose pause is its stop (a deployment scaled to 0).
			return true, false
		case w.State.Terminal():
			return false, true
		}
	case ConditionFailed:
		switch w.State {
		case store.StateFailed:
			return true, false
		case store.StateExited, store.StateDeleted:
			return false, true
		}
	case ConditionDeleted:
		return w.State == store.StateDeleted, false
	case ConditionTerminal:
		return w.State.Terminal(), false
	}
	return false, false
}

// failsFast reports whether a workload recorded with a waiting reason that
// ends a wait (runtime.Fatal: its image cannot be pulled, it crash-loops …)
// can no longer be expected to meet c on its own: every condition but
// failed and deleted waits for it to run. Only while it is starting or
// running: a stop's wait is not about the pod's trouble.
func (c Condition) failsFast(w store.Workload) bool {
	switch c {
	case ConditionStarted, ConditionExited, ConditionTerminal:
	default:
		return false
	}
	switch w.State {
	case store.StateCreated, store.StateStarting, store.StateRunning:
		return runtime.Fatal(w.Reason)
	}
	return false
}

// stillStuck reads the newest pod of w's current template (one list of its
// pods; for a deployment a GET of it and one list of its ReplicaSets too:
// after a rollback the stuck pod of the template rolled back from is still
// the newest until the old template's pod is made) and returns w with the pod's
// current reason and message when it still waits with a reason that ends a
// wait. A pod that has recovered, or none, or a failed read, is not stuck.
func (f *Factory) stillStuck(ctx context.Context, w store.Workload) (store.Workload, bool) {
	id, err := runtimeid.Parse(w.RuntimeID)
	if err != nil {
		return w, false
	}
	client, err := f.Client(id.Runtime)
	if err != nil {
		return w, false
	}
	pod, err := runtime.New(client, id.Runtime).NewestCurrentPod(ctx, id, w.UID)
	if err != nil {
		return w, false
	}
	o, ok := runtime.PodStatusOf(pod).Observation(w.UID)
	if !ok || !runtime.Fatal(o.Reason) {
		return w, false
	}
	w.Reason, w.Message = o.Reason, o.Message
	return w, true
}

// StuckError ends a wait at once: a workload's newest pod waits with a
// reason that will not go away without the user. Its message is one line
// per workload: the ID, the reason, the kubelet's message (escaped for the
// terminal) and what to do.
type StuckError struct {
	Lines []string
}

func (e *StuckError) Error() string { return strings.Join(e.Lines, "; ") }

// stuckLine is the StuckError line of w.
func stuckLine(w store.Workload) string {
	msg := ""
	if w.Message != "" {
		msg = ": " + escapeTerminal(w.Message)
	}
	return fmt.Sprintf("%s: %s%s (%s; kubectl gobrave inspect %s)", w.RuntimeID, w.Reason, msg, reasonHint(w), w.Name)
}

// reasonHint says what to do about a recorded reason.
func reasonHint(w store.Workload) string {
	switch w.Reason {
	case runtime.ReasonErrImagePull, runtime.ReasonImagePullBackOff:
		return "check the image name and pull secrets"
	case runtime.ReasonInvalidImageName:
		return "fix the image reference: registry/name:tag or name@sha256:digest"
	case runtime.ReasonCreateContainerConfigError:
		return "check the Secrets, ConfigMaps and environment the spec refers to"
	case runtime.ReasonCreateContainerError:
		return "check the command, entrypoint and mounts of the spec"
	case runtime.ReasonCrashLoopBackOff:
		return "the container keeps exiting: see kubectl gobrave logs --previous " + w.Name
	case runtime.ReasonUnschedulable:
		return "no node fits the pod: check --node-constraint and the CPU and memory requests, or add nodes"
	}
	return "see the pod with kubectl describe"
}

// reasonNote is ", Reason: message" for a pending workload with a reason,
// for the progress line and the timeout error.
func reasonNote(w store.Workload) string {
	if w.Reason == "" {
		return ""
	}
	if w.Message == "" {
		return ", " + w.Reason
	}
	return ", " + w.Reason + ": " + escapeTerminal(w.Message)
}

// owner identifies this process for monitor leases.
func owner() store.Owner {
	host, _ := os.Hostname()
	return store.Owner{ID: fmt.Sprintf("%s/%d/%d", host, os.Getpid(), time.Now().UnixNano()), PID: os.Getpid(), Host: host}
}

// byContext groups workloads by the kubeconfig context of their runtime.
func (f *Factory) byContext(ws []store.Workload) (map[string][]runtimeid.ID, map[string]string, error) {
	groups := map[string][]runtimeid.ID{}
	runtimeOf := map[string]string{}
	for _, w := range ws {
		id, err := runtimeid.Parse(w.RuntimeID)
		if err != nil {
			return nil, nil, err
		}
		ctxName, err := f.ContextFor(id.Runtime)
		if err != nil {
			return nil, nil, err
		}
		groups[ctxName] = append(groups[ctxName], id)
		runtimeOf[ctxName] = id.Runtime
	}
	return groups, runtimeOf, nil
}

// onItsCluster returns the IDs whose recorded cluster is the one runtime
// points at now (or that have none recorded), and warns about the others: a
// monitor there would record their objects as deleted.
func (f *Factory) onItsCluster(ctx context.Context, st *store.Store, rt string, ids []runtimeid.ID) ([]runtimeid.ID, error) {
	cur, err := f.ClusterID(rt)
	if err != nil || cur == "" {
		return ids, err
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = id.String()
	}
	recs, err := st.Clusters(ctx, keys)
	if err != nil {
		return nil, err
	}
	kept := ids[:0:0]
	for _, id := range ids {
		if rec := recs[id.String()]; rec != "" && rec != cur {
			fmt.Fprintf(f.warnings(), "warning: %s was made on %s, runtime %s now points at %s: not monitored (switch back with --context)\n", id, rec, rt, cur)
			continue
		}
		kept = append(kept, id)
	}
	return kept, nil
}

// runMonitors runs one monitor per kubeconfig context over ws until ctx ends
// or (without follow) every ID is terminal.
func (f *Factory) runMonitors(ctx context.Context, st *store.Store, ws []store.Workload, opts monitor.Options) (monitor.Summary, error) {
	set := f.newMonitorSet(ctx, st, opts)
	if err := set.add(ws); err != nil {
		set.stop()
		return monitor.Summary{}, err
	}
	return set.wait()
}

// monitorSet is one monitor per kubeconfig context; adding IDs of a context
// with no monitor yet starts one.
type monitorSet struct {
	f    *Factory
	st   *store.Store
	opts monitor.Options
	ctx  context.Context
	stop context.CancelFunc

	mu    sync.Mutex
	mons  map[string]*monitor.Monitor
	nss   map[string]int // namespaces of the IDs to come, by context (expect)
	total monitor.Summary
	errs  []error
	wg    sync.WaitGroup
	// hold keeps the monitors add makes from running until release: a
	// monitor that does not follow ends once its IDs are terminal, before
	// the IDs of later pages are added.
	hold bool
	held []*monitor.Monitor
}

func (f *Factory) newMonitorSet(ctx context.Context, st *store.Store, opts monitor.Options) *monitorSet {
	tuneGCForMonitoring()
	if opts.Owner.ID == "" {
		opts.Owner = owner()
	}
	if opts.SyncTimeout == 0 {
		// --request-timeout bounds the wait for the informers too (else 30 s).
		opts.SyncTimeout = f.requestTimeout()
	}
	if opts.Warn == nil {
		// A list or watch that fails and retries, in one line (not
		// client-go's klog line per retry).
		opts.Warn = f.warn
	}
	ctx, stop := context.WithCancel(ctx)
	return &monitorSet{f: f, st: st, opts: opts, ctx: ctx, stop: stop, mons: map[string]*monitor.Monitor{}}
}

// add gives the workloads to the monitor of their context, starting it if
// needed. IDs a monitor already has are ignored.
func (s *monitorSet) add(ws []store.Workload) error {
	groups, runtimeOf, err := s.f.byContext(ws)
	if err != nil {
		return err
	}
	ctxNames := make([]string, 0, len(groups))
	for c := range groups {
		ctxNames = append(ctxNames, c)
	}
	sort.Strings(ctxNames)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range ctxNames {
		ids, err := s.f.onItsCluster(s.ctx, s.st, runtimeOf[c], groups[c])
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			continue
		}
		groups[c] = ids
		if m := s.mons[c]; m != nil {
			m.Add(groups[c]...)
			continue
		}
		client, err := s.f.WatchClient(runtimeOf[c])
		if err != nil {
			return err
		}
		mopts := s.opts
		mopts.Namespaces = s.nss[c]
		mopts.Owner.ID = fmt.Sprintf("%s/%s", s.opts.Owner.ID, c) // one lease owner per monitor
		m := monitor.New(client, s.st, mopts)
		m.Add(groups[c]...)
		s.mons[c] = m
		if s.hold {
			s.held = append(s.held, m) // started by release
			continue
		}
		s.start(m)
	}
	return nil
}

// has reports whether a monitor of the set has the runtime ID id (added
// and not finished).
func (s *monitorSet) has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.mons {
		if m.Has(id) {
			return true
		}
	}
	return false
}

// start runs m until it returns, adding up its summary. s.mu is held.
func (s *monitorSet) start(m *monitor.Monitor) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		sum, err := m.Run(s.ctx)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.total.Reattached += sum.Reattached
		s.total.Changed += sum.Changed
		s.total.Terminal += sum.Terminal
		if err != nil && !errors.Is(err, context.Canceled) {
			s.errs = append(s.errs, err)
			s.stop() // a following set must not run on without it
		}
	}()
}

// expect tells the monitors to come how many namespaces the records of
// scopes span in each context, before their IDs are added page by page.
func (s *monitorSet) expect(scopes []store.Scope) error {
	nss := map[string]map[string]bool{}
	for _, sc := range scopes {
		c, err := s.f.ContextFor(sc.Runtime)
		if err != nil {
			return err
		}
		if nss[c] == nil {
			nss[c] = map[string]bool{}
		}
		nss[c][sc.Namespace] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nss = map[string]int{}
	for c, m := range nss {
		s.nss[c] = len(m)
	}
	return nil
}

// wait waits for every monitor to return and sums them up.
func (s *monitorSet) wait() (monitor.Summary, error) {
	s.wg.Wait()
	s.stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total, errors.Join(s.errs...)
}

// discoverInterval is how often a following `monitor --all` or `recover`
// looks for IDs that became non-terminal since it began.
const discoverInterval = time.Second

// liveScanPage is the page of records runMonitorsDiscovering reads at a time.
const liveScanPage = 1000

// discoverPage is the page of events runMonitorsDiscovering's look for new
// IDs reads at a time.
const discoverPage = 1024

// runMonitorsDiscovering is runMonitors for `monitor --all --follow` and
// `recover` without --once: it also picks up the IDs that become
// non-terminal after it started, whatever the event (created, started again,
// resumed, adopted, stopped while exited...), reading only the events
// recorded since its last look and the records they concern.
func (f *Factory) runMonitorsDiscovering(ctx context.Context, st *store.Store, opts monitor.Options) (monitor.Summary, int, error) {
	// The last event before the first list: what is recorded after it is
	// either in the list or found by the next look (adding twice is harmless).
	lastSeq, err := st.LastEventSeq(ctx)
	if err != nil {
		return monitor.Summary{}, 0, err
	}
	scopes, err := st.LiveScopes(ctx)
	if err != nil {
		return monitor.Summary{}, 0, err
	}
	set := f.newMonitorSet(ctx, st, opts)
	// The IDs are given page by page, and the records are not kept (the
	// monitors keep what they need of each ID): at 100,000 the records
	// would be about 100 MiB. The monitors learn the namespaces first, so
	// that they choose cluster-wide informers from the first page.
	if err := set.expect(scopes); err != nil {
		set.stop()
		return monitor.Summary{}, 0, err
	}
	n := 0
	err = st.ScanLive(ctx, store.ScanFilter{}, liveScanPage, func(page []store.LiveRecord) error {
		ws := make([]store.Workload, len(page))
		for i := range page {
			ws[i] = page[i].Workload
		}
		n += len(ws)
		return set.add(ws)
	})
	if err != nil {
		set.stop()
		return monitor.Summary{}, n, err
	}
	var discovered sync.WaitGroup
	discovered.Go(func() {
		tick := time.NewTicker(discoverInterval)
		defer tick.Stop()
		for {
			select {
			case <-set.ctx.Done():
				return
			case <-tick.C:
			}
			lastSeq = discover(set.ctx, st, lastSeq, discoverPage, set.has, func(found []store.Workload) {
				if err := set.add(found); err != nil {
					set.mu.Lock()
					set.errs = append(set.errs, err)
					set.mu.Unlock()
				}
			})
		}
	})
	// Following monitors end only with ctx; wait for it, then for them.
	<-set.ctx.Done()
	sum, err := set.wait()
	discovered.Wait()
	return sum, n, err
}

// historyReader is what discover reads of the store.
type historyReader interface {
	EventsPage(ctx context.Context, afterSeq int64, limit int) ([]store.Event, error)
	Records(ctx context.Context, ids []string) (map[string]store.Workload, error)
}

// discover is one look of runMonitorsDiscovering for IDs that became
// non-terminal: it reads the events recorded after lastSeq, page events
// at a time, and the records of the IDs they concern that no monitor has
// (has: add would ignore them), hands the non-terminal ones to add and
// returns the seq read up to. A page at a time: the first look after the
// initial sync reads the events of every workload the monitors have just
// recorded (100,000 at N = 100,000), about 4 MiB of events when read at
// once. Those are the monitors' own IDs: their records are not read (they
// were, 100,000 of them, beside the writer recording the initial state).
// An error leaves the rest for the next look, which reads the same events
// again.
func discover(ctx context.Context, r historyReader, lastSeq int64, page int, has func(string) bool, add func([]store.Workload)) int64 {
	for ctx.Err() == nil {
		evs, err := r.EventsPage(ctx, lastSeq, page)
		if err != nil {
			return lastSeq
		}
		last := lastSeq
		seen := map[string]bool{}
		var ids []string
		for _, e := range evs {
			last = max(last, e.Seq)
			if !seen[e.RuntimeID] {
				seen[e.RuntimeID] = true
				if !has(e.RuntimeID) {
					ids = append(ids, e.RuntimeID)
				}
			}
		}
		// Any event may leave a record non-terminal: read them all, in
		// one query per 500 IDs.
		var recs map[string]store.Workload
		if len(ids) > 0 {
			if recs, err = r.Records(ctx, ids); err != nil {
				return lastSeq
			}
		}
		lastSeq = last
		var found []store.Workload
		for _, id := range ids {
			if w, ok := recs[id]; ok && !w.State.Terminal() {
				found = append(found, w)
			}
		}
		if len(found) > 0 {
			add(found)
		}
		if len(evs) < page {
			break
		}
	}
	return lastSeq
}

// waitFor blocks until every workload meets cond, one of them cannot any
// more, or ctx ends: its deadline (the overall timeout, exit code 1) or an
// interrupt (exit code 130). Monitors record what they see in the database;
// the wait reads the database.
func (f *Factory) waitFor(ctx context.Context, st *store.Store, ws []store.Workload, cond Condition, timeout time.Duration, progress io.Writer) error {
	// progress gets a status line when it is a terminal.
	pending := map[string]store.Workload{}
	for _, w := range ws {
		pending[w.RuntimeID] = w
	}
	mctx, stopMonitors := context.WithCancel(ctx)
	defer stopMonitors()
	monErr := make(chan error, 1)
	monDone := make(chan struct{})
	var live []store.Workload
	for _, w := range ws {
		if !w.State.Terminal() {
			live = append(live, w)
		}
	}
	go func() {
		defer close(monDone)
		_, err := f.runMonitors(mctx, st, live, monitor.Options{Follow: true})
		monErr <- err
	}()

	var failed, stuck []string
	checked := map[string]time.Time{} // stuck records the pod did not confirm, by their UpdatedAt
	bar := newProgress(progress)
	defer bar.done()
	check := func(ctx context.Context) (bool, error) {
		var notes []string
		defer func() {
			sort.Strings(notes)
			bar.update("waiting for %s: %d of %d met%s", cond, len(ws)-len(pending), len(ws), strings.Join(notes, ""))
		}()
		for id := range pending {
			w, err := st.Get(ctx, id)
			if err != nil {
				return false, err
			}
			ok, impossible := cond.check(w)
			switch {
			case ok:
				delete(pending, id)
			case impossible:
				delete(pending, id)
				failed = append(failed, fmt.Sprintf("%s is %s (%s)", id, w.State, escapeTerminal(w.Message)))
			case cond.failsFast(w) && checked[id] != w.UpdatedAt:
				// Confirm with the pod itself: the record may predate this
				// wait, and the pod may have recovered since.
				live, ok := f.stillStuck(ctx, w)
				if !ok {
					checked[id] = w.UpdatedAt // look again when the record changes
					break
				}
				delete(pending, id)
				stuck = append(stuck, stuckLine(live))
			case w.Reason != "":
				notes = append(notes, "; "+id+reasonNote(w))
			}
		}
		return len(pending) == 0 || len(failed)+len(stuck) > 0, nil
	}
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-monErr:
			if err != nil {
				return false, err
			}
			monErr = nil
		default:
		}
		return check(ctx)
	})
	// Let the monitors record what is pending and release their leases.
	stopMonitors()
	<-monDone
	if len(stuck) > 0 {
		sort.Strings(stuck)
		err := error(&StuckError{Lines: stuck})
		if len(failed) > 0 {
			sort.Strings(failed)
			err = errors.Join(err, fmt.Errorf("wait for %s: %s", cond, strings.Join(failed, "; ")))
		}
		return err
	}
	if len(failed) > 0 {
		sort.Strings(failed)
		return fmt.Errorf("wait for %s: %s", cond, strings.Join(failed, "; "))
	}
	if err != nil {
		if ctx.Err() != nil && len(pending) > 0 {
			ids := make([]string, 0, len(pending))
			for id, w := range pending {
				cur, _ := st.Get(context.WithoutCancel(ctx), id)
				if cur.State == "" {
					cur = w
				}
				ids = append(ids, fmt.Sprintf("%s (%s%s)", id, cur.State, reasonNote(cur)))
			}
			sort.Strings(ids)
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("timed out after %s waiting for %s: %s", timeout, cond, strings.Join(ids, ", "))
			}
			// Main's signal context: Ctrl-C or SIGTERM.
			return interruptedf("interrupted while waiting for %s: %s", cond, strings.Join(ids, ", "))
		}
		return err
	}
	return nil
}

// waitGone polls until each workload object is gone from the cluster (or
// replaced by an object with another UID) and records ContainerDeleted.
// delete --wait uses it: the record is already in state deleted. Like
// waitFor it tells a timeout from an interrupt.
func (f *Factory) waitGone(ctx context.Context, st *store.Store, ws []store.Workload, timeout time.Duration) error {
	left := append([]store.Workload(nil), ws...)
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var still []store.Workload
		for _, w := range left {
			id, err := runtimeid.Parse(w.RuntimeID)
			if err != nil {
				return false, err
			}
			client, err := f.Client(id.Runtime)
			if err != nil {
				return false, err
			}
			uid, exists, err := runtime.New(client, id.Runtime).Exists(ctx, id)
			if err != nil {
				return false, err
			}
			if exists && (w.UID == "" || uid == w.UID) {
				still = append(still, w)
				continue
			}
			if _, _, err := st.Apply(ctx, store.Transition{RuntimeID: w.RuntimeID, Type: store.ContainerDeleted, UID: w.UID, Message: "deleted from the cluster"}); err != nil {
				return false, err
			}
		}
		left = still
		return len(left) == 0, nil
	})
	if err != nil && ctx.Err() != nil && len(left) > 0 {
		ids := make([]string, len(left))
		for i, w := range left {
			ids[i] = w.RuntimeID
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("timed out after %s waiting for deletion: %s still exist", timeout, strings.Join(ids, ", "))
		}
		return interruptedf("interrupted while waiting for deletion: %s still exist", strings.Join(ids, ", "))
	}
	return err
}
