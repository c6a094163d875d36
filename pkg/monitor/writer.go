package monitor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"

	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// traceLevel is the klog verbosity (-v) at which the writer logs each batch
// it records: how long its oldest observation waited since the informer's
// handler saw it, the commit, and OnEvent (the printed lines). The latency
// phase of hack/bench reads these lines to split an event's delay.
const traceLevel = 4

// writeLoop is the single writer: it records queued observations in batches
// (one transaction each), calls OnEvent and retires terminal IDs. It returns
// after draining the queue once stop is closed, or on a store error. The
// history of the IDs another process leases is followed by pollLoop, on a
// goroutine of its own: a poll of the history (707-777 ms at 100,000, right
// after the initial sync) must not delay the recording of what the
// informers see.
//
// The WAL is checkpointed beside it (checkpointLoop), a second after the
// writes, so that SQLite's automatic checkpoint does not run in one of the
// writer's commits.
func (m *Monitor) writeLoop(ctx context.Context, stop <-chan struct{}) error {
	ckctx, stopCheckpoints := context.WithCancel(ctx)
	wrote := make(chan struct{}, 1)
	checkpointing := make(chan struct{})
	go func() {
		defer close(checkpointing)
		m.checkpointLoop(ckctx, wrote)
	}()
	defer func() {
		stopCheckpoints()
		<-checkpointing
		m.qmu.Lock()
		m.qclosed = true
		m.qcond.Broadcast()
		m.qmu.Unlock()
	}()
	for {
		var holds <-chan time.Time
		if len(m.failHolds) > 0 {
			holds = time.After(failHoldPoll)
		}
		select {
		case <-m.qwake:
		case <-holds:
		case <-stop:
			return m.drain(ctx, true)
		}
		err := m.drain(ctx, false)
		signal(wrote)
		if err != nil {
			return err
		}
	}
}

// checkpointEvery is how long checkpointLoop lets writes gather before it
// checkpoints them (nanoseconds; tests shorten it).
var checkpointEvery atomic.Int64

func init() { checkpointEvery.Store(int64(time.Second)) }

// afterCheckpoint, when set (tests), is called after each checkpoint.
var afterCheckpoint atomic.Pointer[func(store.CheckpointResult, error)]

// checkpointLoop checkpoints the WAL (store.Checkpoint, PASSIVE: it waits
// for no one) checkpointEvery after the writer signals wrote, until ctx
// ends. SQLite checkpoints by itself inside the commit that takes the WAL
// past wal_autocheckpoint frames (8,000 pages, 32 MiB): that commit then
// copies those pages into the database file and syncs it, on the writer's
// path; a checkpoint of 7,000 pages of a 110 MB database took 0.48 s. Here
// the copy runs on a connection of its own while the writer goes on, the
// WAL starts over after it and stays well below the limit.
func (m *Monitor) checkpointLoop(ctx context.Context, wrote <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-wrote:
		}
		t := time.NewTimer(time.Duration(checkpointEvery.Load()))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		start := time.Now()
		r, err := m.st.Checkpoint(ctx)
		if fn := afterCheckpoint.Load(); fn != nil {
			(*fn)(r, err)
		}
		if v := klog.V(traceLevel); v.Enabled() {
			if d := time.Since(start); d >= time.Millisecond {
				v.InfoS("monitor: checkpoint", "ms", ms(d), "frames", r.Log, "copied", r.Checkpointed, "err", err)
			}
		}
	}
}

// pollLoop follows the history every pollEvery until ctx ends. It runs
// beside the writer: the store's connections let a read run while the
// writer commits (WAL), and what the two share of the Monitor is behind
// m.mu.
func (m *Monitor) pollLoop(ctx context.Context) {
	poll := time.NewTicker(m.pollEvery)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
		}
		if m.beforePoll != nil {
			m.beforePoll()
		}
		t := time.Now()
		m.follow(ctx)
		if v := klog.V(traceLevel); v.Enabled() {
			if d := time.Since(t); d >= time.Millisecond {
				v.InfoS("monitor: history polled", "ms", ms(d))
			}
		}
	}
}

// drain records everything queued, but the job failures held back for
// their failed pod (holdFailures); final (the writer stops) records those
// too.
func (m *Monitor) drain(ctx context.Context, final bool) error {
	for first := true; ; first = false {
		m.qmu.Lock()
		items := m.queue
		m.queue = nil
		m.qcond.Broadcast() // room for the handlers waiting (enqueueWait)
		m.qmu.Unlock()
		if first || len(items) > 0 {
			items = m.holdFailures(items, time.Now(), final)
		}
		if len(items) == 0 {
			return nil
		}
		for len(items) > 0 {
			n := min(len(items), batchSize)
			if err := m.record(ctx, items[:n]); err != nil {
				return err
			}
			items = items[n:]
		}
	}
}

// record applies one batch of items.
func (m *Monitor) record(ctx context.Context, items []item) error {
	start := time.Now()
	m.enrichFailures(ctx, items)
	var ts []store.Transition
	for _, it := range items {
		if it.obs.Type == "" {
			// Only a UID to remember (no event carries it to the store).
			for _, id := range it.ids {
				if err := m.st.SetUID(ctx, id, it.setUID); err != nil && !errors.Is(err, store.ErrNotFound) {
					return fmt.Errorf("monitor: %w", err)
				}
			}
			continue
		}
		for _, id := range it.ids {
			ts = append(ts, store.Transition{RuntimeID: id, Type: it.obs.Type, Message: it.obs.Message, UID: it.obs.UID, Time: it.at, Result: it.obs.Result})
		}
	}
	if len(ts) == 0 {
		return nil
	}
	applyStart := time.Now()
	res, err := m.st.ApplyBatchNoSpecs(ctx, ts)
	var gone []string
	if errors.Is(err, store.ErrNotFound) {
		// A record was removed while monitored: apply one by one and drop it.
		res, gone, err = applyEach(ctx, m.st, ts)
	}
	if err != nil {
		return fmt.Errorf("monitor: record %d events: %w", len(ts), err)
	}

	var events []store.Event
	retired := false
	m.mu.Lock()
	for _, id := range gone {
		m.finishLocked(id, false)
		retired = true
	}
	for _, a := range res {
		if a.Applied {
			events = append(events, a.Event)
		}
		if m.recordedLocked(a.Workload.RuntimeID, a.Applied, a.Workload.State) {
			retired = true
		}
	}
	m.skipOwnLocked(events)
	m.mu.Unlock()

	committed := time.Now()
	m.onEvents(events)
	if v := klog.V(traceLevel); v.Enabled() {
		oldest := start
		for _, it := range items {
			if !it.at.IsZero() && it.at.Before(oldest) {
				oldest = it.at
			}
		}
		v.InfoS("monitor: batch recorded", "transitions", len(ts), "events", len(events),
			"waitedMs", ms(start.Sub(oldest)), "enrichMs", ms(applyStart.Sub(start)),
			"commitMs", ms(committed.Sub(applyStart)), "onEventMs", ms(time.Since(committed)))
	}
	if retired {
		signal(m.wake) // the control loop releases their leases
	}
	return nil
}

// skipOwnLocked moves the history poll's position past the events this
// writer has just recorded when nothing else lies between: the position is
// at or inside their seqs, which follow one another without a gap (no other
// process wrote meanwhile). The poll would only read them back to do
// nothing: they are observations this writer recorded, of IDs it held (or
// has just finished), already handed to OnEvent. After the initial sync of 100,000 workloads that was 100 pages
// of the history read beside the writer, while the next changes came in.
// An event of another process among them leaves the position where it is:
// the poll reads from there, that event included.
func (m *Monitor) skipOwnLocked(events []store.Event) {
	if !m.seqSet || len(events) == 0 {
		return
	}
	seqs := make([]int64, 0, len(events))
	for _, e := range events {
		if !e.Type.Observed() {
			return // a request: the poll reads it (followEvents acts on those)
		}
		seqs = append(seqs, e.Seq)
	}
	slices.Sort(seqs)
	for i := 1; i < len(seqs); i++ {
		if seqs[i] != seqs[i-1]+1 {
			return
		}
	}
	if first, last := seqs[0], seqs[len(seqs)-1]; m.lastSeq >= first-1 && m.lastSeq < last {
		m.lastSeq = last
	}
}

// ms is d in milliseconds, to 0.1 ms, for the trace.
func ms(d time.Duration) float64 {
	return float64(d.Round(100*time.Microsecond)) / float64(time.Millisecond)
}

// follow polls the history, one query for every ID of this Monitor, and
// reads the records of the IDs concerned in one more:
//   - the new events of IDs leased by another process go to OnEvent, and
//     those IDs that became terminal (or were removed) are finished;
//   - a request recorded for an ID this Monitor holds (by another process,
//     or by anyone: an observation recorded twice is recorded once) may
//     change nothing in the cluster, so no watch event would come: a start
//     of a deployment already running. Unless the request made the record
//     terminal, the repeat filter of its subscription is reset and its
//     object is checked again in the cache (the control loop does it), so
//     that what is observed is recorded under the record's new epoch.
//
// The history is read followPage events at a time: after the initial sync
// of 100,000 workloads it holds the 100,000 events this process has just
// recorded, and reading them at once cost 20-25 MiB of peak RSS. It runs on
// pollLoop's goroutine, not the writer's, so it reads on to the end.
//
// Errors are left for the next poll, which reads the same events again.
func (m *Monitor) follow(ctx context.Context) {
	for ctx.Err() == nil {
		m.mu.Lock()
		if !m.seqSet || m.nPassive+m.nHeld == 0 {
			m.mu.Unlock()
			return
		}
		after := m.lastSeq
		m.mu.Unlock()
		evs, err := m.st.EventsPage(ctx, after, followPage)
		if err != nil || len(evs) == 0 {
			return
		}
		if !m.followEvents(ctx, after, evs) || len(evs) < followPage {
			return
		}
	}
}

// onEvents hands events to OnEvent, one caller at a time (the writer and
// the poll both have events for it).
func (m *Monitor) onEvents(evs []store.Event) {
	if m.opts.OnEvent == nil || len(evs) == 0 {
		return
	}
	m.onEventMu.Lock()
	defer m.onEventMu.Unlock()
	for _, e := range evs {
		m.opts.OnEvent(e)
	}
}

// followPage is how many events of the history follow reads at a time.
const followPage = 1024

// followEvents is follow's work on one page of events, in seq order; false
// when it could not finish (the page is read again at the next poll).
func (m *Monitor) followEvents(ctx context.Context, after int64, evs []store.Event) bool {
	last := after
	var mine []store.Event
	var ids []string
	check := map[string]bool{}
	m.mu.Lock()
	for _, e := range evs {
		last = max(last, e.Seq)
		sub := m.subs.get(e.RuntimeID)
		passive := sub != nil && sub.has(flagPassive)
		if passive {
			mine = append(mine, e)
		}
		if (passive || sub != nil && sub.has(flagHeld) && !e.Type.Observed()) && !check[e.RuntimeID] {
			check[e.RuntimeID] = true
			ids = append(ids, e.RuntimeID)
		}
	}
	m.mu.Unlock()

	var recs map[string]store.Workload
	if len(ids) > 0 {
		var err error
		if recs, err = m.st.Records(ctx, ids); err != nil {
			return false
		}
	}
	m.mu.Lock()
	m.lastSeq = max(m.lastSeq, last)
	m.mu.Unlock()
	m.onEvents(mine)

	wake := false
	m.mu.Lock()
	for _, s := range ids {
		sub := m.subs.get(s)
		if sub == nil {
			continue // finished meanwhile
		}
		w, ok := recs[s]
		if !ok {
			m.finishLocked(s, false)
			wake = true
			continue
		}
		sub.setState(codeOf(w.State))
		if sub.has(flagPassive) {
			if w.State.Terminal() {
				m.finishLocked(s, true)
				wake = true
			}
			continue
		}
		if w.State.Terminal() {
			// Deleted on request: the holder goes on until it sees the
			// object go (or anything else of it) and records that.
			continue
		}
		if sub.has(flagWatched) && !slices.Contains(m.rechecks, sub) {
			sub.setLast(0)
			sub.setPodLast(0)
			sub.set(flagSnapshotted, false)
			m.rechecks = append(m.rechecks, sub)
			wake = true
		}
	}
	m.mu.Unlock()
	if wake {
		signal(m.wake)
	}
	return true
}
