package cmd_test

import (
	"bytes"
	"context"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gobrave/kubectl-gobrave/internal/genapi"
	"github.com/gobrave/kubectl-gobrave/pkg/cmd"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// TestMonitorFollowMemoryPerID: `monitor --all --follow` over 2,000 and
// over 20,000 (400 and 4,000 under -race) running workloads over 20
// namespaces (cluster-wide informers), of an API server that generates its
// objects as it streams them (internal/genapi: with the gobrave.dev/spec
// annotation and managedFields, as a real server sends them), stopped once
// it has printed the event of every workload (synced and recorded). A
// following monitor keeps something per ID (its lease, its subscription,
// the observation its informer holds), so its peak heap is not flat in N;
// what it may keep is bounded: the growth of the peak heap from the small N
// to the large one, per added workload, at most maxPerID. Keeping each
// record, or each object (even slimmed: about 2 KiB), exceeds it. No
// clock is read.
func TestMonitorFollowMemoryPerID(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds 22,000 records")
	}
	small, large := 2000, 20000
	if raceEnabled {
		small, large = 400, 4000
	}
	// Measured (go test, no -race): main before the compacted per-ID state
	// 3,768 bytes per workload (it kept every record while adding them,
	// ObjectMeta in each cache entry, whole last observations per ID and an
	// unbounded queue of them), this code about 1,700. The peak includes the
	// garbage of decoding (and, in this process, generating) the objects.
	// The bound catches a return of any of those; it is not issue 16's goal
	// (128 MiB of RSS at 100,000 is about 0.6 KiB of live heap per
	// workload), which this code does not meet yet.
	const maxPerID = 3072
	grow := map[int]uint64{}
	for _, n := range []int{small, large} {
		grow[n] = monitorPeak(t, n)
		t.Logf("N = %d: peak heap %.1f MiB above the start", n, float64(grow[n])/(1<<20))
	}
	perID := 0.0
	if grow[large] > grow[small] {
		perID = float64(grow[large]-grow[small]) / float64(large-small)
	}
	t.Logf("peak heap per added workload: %.0f bytes", perID)
	if perID > maxPerID {
		t.Errorf("peak heap grew from %.1f MiB (N = %d) to %.1f MiB (N = %d): %.0f bytes per workload, more than %d: memory follows the objects or records",
			float64(grow[small])/(1<<20), small, float64(grow[large])/(1<<20), large, perID, maxPerID)
	}
}

// monitorPeak seeds n records, runs monitor --all --follow until it has
// recorded the start of each, and returns its peak heap above the heap
// before it.
func monitorPeak(t *testing.T, n int) uint64 {
	t.Helper()
	dir := t.TempDir()
	statePath := filepath.Join(dir, "state.db")
	api := &genapi.Server{N: n, Namespaces: 20}
	st, err := store.Open(t.Context(), statePath)
	if err != nil {
		t.Fatal(err)
	}
	if err := api.Seed(t.Context(), st); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	defer srv.Close()

	f := cmd.NewFactory()
	f.Home = filepath.Join(dir, "home")
	f.Getenv = func(string) string { return "" }
	f.StateDBFlag = statePath
	f.NewClient = func(string) (kubernetes.Interface, error) {
		return kubernetes.NewForConfig(&rest.Config{Host: srv.URL, QPS: -1})
	}
	// The events printed are counted, not kept.
	out := &lineCount{want: int64(n), done: make(chan struct{})}
	errOut := &bytes.Buffer{}
	streams := genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: out, ErrOut: errOut}
	root := cmd.NewCmdRoot(f, streams)
	root.SetArgs([]string{"monitor", "--all", "--follow", "-o", "json"})

	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	base := sample[0].Value.Uint64()
	var peak atomic.Uint64
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-out.done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	ran := make(chan error, 1)
	go func() { ran <- root.ExecuteContext(ctx) }()
	select {
	case <-out.done: // every workload's start recorded and printed
	case err := <-ran:
		t.Fatalf("monitor --all --follow over %d ended after %d events: %v\n%s", n, out.n.Load(), err, errOut)
	}
	<-sampled
	cancel()
	err = <-ran
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("monitor --all --follow over %d: %v\n%s", n, err, errOut)
	}
	if p := peak.Load(); p > base {
		return p - base
	}
	return 0
}

// lineCount counts the lines written to it; done is closed at want.
type lineCount struct {
	want int64
	n    atomic.Int64
	done chan struct{}
	once atomic.Bool
}

func (c *lineCount) Write(p []byte) (int, error) {
	if c.n.Add(int64(bytes.Count(p, []byte("\n")))) >= c.want && c.once.CompareAndSwap(false, true) {
		close(c.done)
	}
	return len(p), nil
}
