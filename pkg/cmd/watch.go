package cmd

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// watch prints a row for every record that changes after the event with
// sequence number since, as kubectl get -w does: it polls the events table
// (every process's monitors and verbs append to it) every o.Poll and reads
// the changed records, printing those the selection keeps. It only reads
// the state database, takes no lock or lease and asks nothing of the
// cluster. It ends when ctx does (Ctrl-C, SIGTERM) with no error.
//
// With --state, a change is printed only when the record's new state is
// one of them; without it every change is printed, a workload that becomes
// exited, failed or deleted too (the default non-terminal filter of ps
// selects only the listing).
func (o *PsOptions) watch(ctx context.Context, st *store.Store, q store.Query, since int64, rp *rowPrinter) error {
	if err := rp.flush(); err != nil {
		return err
	}
	if len(q.States) == 0 {
		q.All = true
	}
	tick := time.NewTicker(o.Poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		evs, err := st.EventsSince(ctx, since)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if len(evs) == 0 {
			continue
		}
		since = evs[len(evs)-1].Seq
		// One row per changed record and poll, in the order of their
		// last change: the row shows the record as it is now.
		var ids []string
		for i := len(evs) - 1; i >= 0; i-- {
			if !slices.Contains(ids, evs[i].RuntimeID) {
				ids = append(ids, evs[i].RuntimeID)
			}
		}
		slices.Reverse(ids)
		for chunk := range slices.Chunk(ids, 400) {
			cq := q
			cq.IDs = chunk
			ws, err := st.Select(ctx, cq)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			byID := make(map[string]store.Workload, len(ws))
			for _, w := range ws {
				byID[w.RuntimeID] = w
			}
			rp.now = o.now()
			for _, id := range chunk {
				if w, ok := byID[id]; ok {
					if err := rp.row(w); err != nil {
						return err
					}
				}
			}
		}
		if err := rp.flush(); err != nil {
			return err
		}
	}
}

// jsonLine is v as one line of JSON.
func jsonLine(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
