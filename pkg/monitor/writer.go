package monitor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// writeLoop is the single writer: it records queued observations in batches
// (one transaction each), calls OnEvent, retires terminal IDs, and follows
// the history of the IDs another process leases. It returns after draining
// the queue once stop is closed, or on a store error.
func (m *Monitor) writeLoop(ctx context.Context, stop <-chan struct{}) error {
	poll := time.NewTicker(m.pollEvery)
	defer poll.Stop()
	for {
		select {
		case <-m.qwake:
			if err := m.drain(ctx); err != nil {
				return err
			}
		case <-poll.C:
			m.follow(ctx)
		case <-stop:
			return m.drain(ctx)
		}
	}
}

// drain records everything queued.
func (m *Monitor) drain(ctx context.Context) error {
	for {
		m.qmu.Lock()
		items := m.queue
		m.queue = nil
		m.qmu.Unlock()
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
			ts = append(ts, store.Transition{RuntimeID: id, Type: it.obs.Type, Message: it.obs.Message, UID: it.obs.UID, Time: it.at})
		}
	}
	if len(ts) == 0 {
		return nil
	}
	res, err := m.st.ApplyBatch(ctx, ts)
	var gone []string
	if errors.Is(err, store.ErrNotFound) {
		// A record was removed while monitored: apply one by one and drop it.
		res, gone, err = m.applyEach(ctx, ts)
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
		id := a.Workload.RuntimeID
		if a.Applied {
			events = append(events, a.Event)
			if prev, ok := m.states[id]; !ok || prev != a.Workload.State {
				m.changed[id] = true
			}
		}
		m.states[id] = a.Workload.State
		if a.Workload.State.Terminal() {
			if _, marked := m.marked[id]; marked {
				m.finishLocked(id, true)
				retired = true
			}
		}
	}
	m.mu.Unlock()

	if m.opts.OnEvent != nil {
		for _, e := range events {
			m.opts.OnEvent(e)
		}
	}
	if retired {
		signal(m.wake) // the control loop releases their leases
	}
	return nil
}

// applyEach applies the transitions one at a time, skipping those of runtime
// IDs no longer in the store (returned in gone).
func (m *Monitor) applyEach(ctx context.Context, ts []store.Transition) (res []store.Applied, gone []string, err error) {
	for _, t := range ts {
		r, err := m.st.ApplyBatch(ctx, []store.Transition{t})
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

// follow polls the history for the IDs leased by another process: their new
// events go to OnEvent, and the IDs that became terminal are finished. Errors
// are left for the next poll.
func (m *Monitor) follow(ctx context.Context) {
	m.mu.Lock()
	if len(m.passive) == 0 || !m.seqSet {
		m.mu.Unlock()
		return
	}
	after := m.lastSeq
	m.mu.Unlock()

	evs, err := m.st.EventsSince(ctx, after)
	if err != nil || len(evs) == 0 {
		return
	}
	var mine []store.Event
	m.mu.Lock()
	for _, e := range evs {
		m.lastSeq = max(m.lastSeq, e.Seq)
		if _, ok := m.passive[e.RuntimeID]; ok {
			mine = append(mine, e)
		}
	}
	m.mu.Unlock()

	check := map[string]bool{}
	for _, e := range mine {
		if m.opts.OnEvent != nil {
			m.opts.OnEvent(e)
		}
		check[e.RuntimeID] = true
	}
	done := false
	for id := range check {
		w, err := m.st.Get(ctx, id)
		m.mu.Lock()
		_, still := m.passive[id]
		switch {
		case !still:
		case errors.Is(err, store.ErrNotFound):
			m.finishLocked(id, false)
			done = true
		case err == nil:
			m.states[id] = w.State
			if w.State.Terminal() {
				m.finishLocked(id, true)
				done = true
			}
		}
		m.mu.Unlock()
	}
	if done {
		signal(m.wake)
	}
}
