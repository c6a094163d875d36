package cmd_test

import (
	"bytes"
	"context"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/gobrave/kubectl-gobrave/internal/genapi"
	"github.com/gobrave/kubectl-gobrave/pkg/cmd"
)

// TestMonitorAllMemoryPerID: `monitor --all` without --follow over 2,000
// and over 20,000 (1,000 and 10,000 under -race) running workloads, as
// TestMonitorFollowMemoryPerID, stopped once it has printed the event of
// every workload. It reads the records page by page (IDs and states) and
// does not keep them: its peak heap grows per added workload by what the
// monitor keeps per ID and the garbage of decoding, not by a list of every
// record (store.List: a 600-byte Workload and its strings per record, and
// a second slice of the live ones). No clock is read.
func TestMonitorAllMemoryPerID(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds 22,000 records")
	}
	if inOwnProcess(t) {
		return
	}
	small, large := 2000, 20000
	if raceEnabled {
		small, large = 1000, 10000
	}
	// Measured (2,000 and 20,000): 3,108 bytes per added workload with
	// store.List (2026-12-01, load 16-20); reading pages, 1,172 then and
	// 1,222-1,494 in five runs on 2026-12-02 (load 5-13). The bound sits
	// 1.5x above the highest of those and 0.74x of the List's.
	const maxPeakPerID = 2300
	peak := map[int]uint64{}
	for _, n := range []int{small, large} {
		peak[n] = monitorAllPeak(t, n)
		t.Logf("N = %d: peak heap %.1f MiB above the start", n, float64(peak[n])/(1<<20))
	}
	perID := float64(sub(peak[large], peak[small])) / float64(large-small)
	t.Logf("per added workload: peak %.0f bytes", perID)
	if perID > maxPeakPerID {
		t.Errorf("peak heap grew by %.0f bytes per workload (N = %d: %.1f MiB, N = %d: %.1f MiB), more than %d: monitor --all holds every record",
			perID, small, float64(peak[small])/(1<<20), large, float64(peak[large])/(1<<20), maxPeakPerID)
	}
}

// monitorAllPeak seeds n records, runs monitor --all (without --follow)
// until it has printed the start of each, and returns its peak heap above
// the heap before it.
func monitorAllPeak(t *testing.T, n int) uint64 {
	t.Helper()
	f, srv := genFactory(t, &genapi.Server{N: n, Namespaces: 20})
	defer srv.Close()
	out := &lineCount{want: int64(n), done: make(chan struct{})}
	errOut := &bytes.Buffer{}
	streams := genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: out, ErrOut: errOut}
	root := cmd.NewCmdRoot(f, streams)
	root.SetArgs([]string{"monitor", "--all", "-o", "json"})

	h := startHeapPeak()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- root.ExecuteContext(ctx) }()
	select {
	case <-out.done: // every workload's start recorded and printed
	case err := <-ran:
		t.Fatalf("monitor --all over %d ended after %d events: %v\n%s", n, out.n.Load(), err, errOut)
	}
	peak := h.stop()
	cancel()
	err := <-ran
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("monitor --all over %d: %v\n%s", n, err, errOut)
	}
	return sub(peak, h.base)
}
