package cmd

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// pageCounter is a historyReader that counts what discover reads.
type pageCounter struct {
	st           *store.Store
	pages        int // EventsPage calls
	maxRows      int // the most events one EventsPage returned
	maxRecordIDs int // the most IDs one Records call asked for
	recordIDs    int // IDs asked for in all
}

func (p *pageCounter) EventsPage(ctx context.Context, after int64, limit int) ([]store.Event, error) {
	evs, err := p.st.EventsPage(ctx, after, limit)
	p.pages++
	p.maxRows = max(p.maxRows, len(evs))
	return evs, err
}

func (p *pageCounter) Records(ctx context.Context, ids []string) (map[string]store.Workload, error) {
	p.maxRecordIDs = max(p.maxRecordIDs, len(ids))
	p.recordIDs += len(ids)
	return p.st.Records(ctx, ids)
}

// TestDiscoverReadsPages: a look of the following `monitor --all` for new
// IDs reads the history a page at a time, and every page: 2,500 events in
// pages of 1,024 are three pages (and the empty read that ends the look
// is not needed when the last page is short), never more than a page of
// events or records at once, and every non-terminal ID found.
func TestDiscoverReadsPages(t *testing.T) {
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	const n, page = 2500, 1024
	for i := range n {
		id, err := runtimeid.New(runtimeid.RuntimeK8s, "ns", runtimeid.KindJob, fmt.Sprintf("task-%04d", i))
		if err != nil {
			t.Fatal(err)
		}
		state := store.StateCreated
		if i%5 == 0 {
			state = store.StateExited // terminal: not handed on
		}
		w := store.Workload{RuntimeID: id.String(), Runtime: id.Runtime, Namespace: id.Namespace, Kind: id.Kind, Name: id.Name, State: state}
		if err := st.Put(t.Context(), w, store.Transition{Type: store.Created}); err != nil {
			t.Fatal(err)
		}
	}
	last, err := st.LastEventSeq(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	r := &pageCounter{st: st}
	found := map[string]bool{}
	got := discover(t.Context(), r, 0, page, func(string) bool { return false }, func(ws []store.Workload) {
		for _, w := range ws {
			found[w.RuntimeID] = true
		}
	})
	if got != last {
		t.Errorf("discover read up to seq %d, want %d", got, last)
	}
	if want := (n + page - 1) / page; r.pages != want {
		t.Errorf("discover read %d pages, want %d", r.pages, want)
	}
	if r.maxRows > page || r.maxRecordIDs > page {
		t.Errorf("discover read %d events and %d records at once, want at most a page (%d)", r.maxRows, r.maxRecordIDs, page)
	}
	if want := n - n/5; len(found) != want {
		t.Errorf("discover found %d non-terminal IDs, want %d", len(found), want)
	}

	// The next look reads from there: one empty page.
	r = &pageCounter{st: st}
	if got := discover(t.Context(), r, last, page, func(string) bool { return false }, func([]store.Workload) { t.Error("nothing new, but IDs were handed on") }); got != last || r.pages != 1 {
		t.Errorf("a look with nothing new: seq %d after %d pages, want %d after 1", got, r.pages, last)
	}
}

// TestDiscoverSkipsHeldIDs: the events of IDs a monitor has (the initial
// state it has just recorded: 100,000 events at N = 100,000) make the look
// read no records; only the IDs no monitor has are read and handed on.
func TestDiscoverSkipsHeldIDs(t *testing.T) {
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	const n, page = 1200, 256
	held := map[string]bool{}
	for i := range n {
		id, err := runtimeid.New(runtimeid.RuntimeK8s, "ns", runtimeid.KindJob, fmt.Sprintf("task-%04d", i))
		if err != nil {
			t.Fatal(err)
		}
		w := store.Workload{RuntimeID: id.String(), Runtime: id.Runtime, Namespace: id.Namespace, Kind: id.Kind, Name: id.Name, State: store.StateCreated}
		if err := st.Put(t.Context(), w, store.Transition{Type: store.Created}); err != nil {
			t.Fatal(err)
		}
		if i%100 != 0 {
			held[w.RuntimeID] = true
		}
	}
	r := &pageCounter{st: st}
	var found []string
	discover(t.Context(), r, 0, page, func(id string) bool { return held[id] }, func(ws []store.Workload) {
		for _, w := range ws {
			found = append(found, w.RuntimeID)
		}
	})
	if want := n / 100; r.recordIDs != want || len(found) != want {
		t.Errorf("discover read %d records and handed on %d IDs, want %d and %d (those no monitor has)", r.recordIDs, len(found), want, want)
	}
	for _, id := range found {
		if held[id] {
			t.Errorf("%s handed on, but a monitor has it", id)
		}
	}
}
