package cmd_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gobrave/kubectl-gobrave/internal/genapi"
	"github.com/gobrave/kubectl-gobrave/pkg/cmd"
	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// TestRecoverOnceMemoryIsFlat: `recover --once` over 2,000 and over 20,000
// (2,000 and 10,000 under -race)
// running workloads (half deployments, half jobs) of an API server that
// generates its objects as it streams them (watch-list, or paginated
// lists), so that the server holds none. The peak of the Go heap above its
// level before the command may grow by at most a fixed margin from 2,000
// to 20,000: a command that keeps every object (an informer cache) or
// every record grows by tens of MiB. No clock is read.
func TestRecoverOnceMemoryIsFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds 22,000 records")
	}
	small, large := 2000, 20000
	if raceEnabled {
		// 22,000 records take minutes under -race. Not smaller: the
		// peak above the start rises with N until the collector has its
		// pace, then stays (under -race 1.9, 2.7, 5.6 and 5.7 MiB at 400,
		// 1,000, 4,000 and 10,000), so 400 against 4,000 read that rise
		// as growth (4.4 MiB once in CI); and an object cache of 3,600
		// more objects (~3.5 MiB) hid under the margin, one of 8,000
		// (~8 MiB) cannot.
		small, large = 2000, 10000
	}
	checkFlat(t, small, large, []string{"recover", "--once", "-o", "json"}, func(n int, text string) error {
		var sum struct{ Reattached, Changed int }
		// The end of the event lines, then the summary, indented.
		if err := json.Unmarshal([]byte(text[strings.LastIndex(text, "{\n"):]), &sum); err != nil || sum.Reattached != n || sum.Changed != n {
			return fmt.Errorf("summary %+v (%v), want %d reattached and changed", sum, err, n)
		}
		return nil
	})
}

// TestPsRefreshMemoryIsFlat: `ps --refresh` runs the same reconcile pass, so
// the same bound holds (the informers it ran before kept every object).
func TestPsRefreshMemoryIsFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds 22,000 records")
	}
	small, large := 2000, 20000
	if raceEnabled {
		small, large = 2000, 10000 // see TestRecoverOnceMemoryIsFlat
	}
	checkFlat(t, small, large, []string{"ps", "--refresh", "--state", "running", "-o", "name"}, func(n int, text string) error {
		// Only a refreshed record is running; the last row is the last job.
		kind, ns, name, _ := (&genapi.Server{N: n, Namespaces: 1}).Object(n - 1)
		want := runtimeid.ID{Runtime: runtimeid.RuntimeK8s, Namespace: ns, Kind: kind, Name: name}.String() + "\n"
		if !strings.HasSuffix(text, want) {
			return fmt.Errorf("the output ends with %q, want the row %q", text[max(0, len(text)-200):], want)
		}
		return nil
	})
}

// checkFlat runs args over small and over large records and fails when the
// peak heap grew by more than a fixed margin; check judges the output's end.
//
// The heap is the process's: goroutines other tests of the package left
// behind (a retry, a closing informer) would be counted too, and were seen
// to add 4–5 MiB under -race. So the test measures in a process of its own,
// the test binary run again for this test alone.
func checkFlat(t *testing.T, small, large int, args []string, check func(n int, out string) error) {
	t.Helper()
	if inOwnProcess(t) {
		return
	}
	grow := map[int]uint64{}
	for _, n := range []int{small, large} {
		grow[n] = commandPeak(t, n, args, check)
		t.Logf("N = %d: peak heap %.1f MiB above the start", n, float64(grow[n])/(1<<20))
	}
	// What may grow with N: the 8-byte hash of each object seen, and the
	// allocator's rounding; an object cache grows by ~1 KiB per object.
	const margin = 4 << 20
	if grow[large] > grow[small]+margin {
		t.Errorf("peak heap grew from %.1f MiB (N = %d) to %.1f MiB (N = %d): more than %d MiB, memory follows N",
			float64(grow[small])/(1<<20), small, float64(grow[large])/(1<<20), large, margin>>20)
	}
}

// flatChildEnv marks the process a memory test runs its measurement in.
const flatChildEnv = "GOBRAVE_TEST_FLAT_CHILD"

// inOwnProcess runs the test t again in a child process of its own and
// reports true when it did (t's result is the child's); false in the
// child, which measures. The heap a test reads belongs to the whole
// process: goroutines and caches left by earlier tests would count in it.
func inOwnProcess(t *testing.T) bool {
	t.Helper()
	if os.Getenv(flatChildEnv) != "" {
		return false
	}
	c := exec.Command(os.Args[0], "-test.run", "^"+t.Name()+"$", "-test.count=1", "-test.v")
	c.Env = append(os.Environ(), flatChildEnv+"=1")
	out, err := c.CombinedOutput()
	t.Logf("%s in its own process:\n%s", t.Name(), out)
	if err != nil {
		t.Fatalf("%s in its own process: %v", t.Name(), err)
	}
	return true
}

// commandPeak seeds n records and objects (internal/genapi, one
// namespace) and returns the peak heap of the command args above the heap
// before it.
func commandPeak(t *testing.T, n int, args []string, check func(n int, out string) error) uint64 {
	t.Helper()
	api := &genapi.Server{N: n, Namespaces: 1, Protobuf: true, KeyOrder: true} // as a real API server serves the plugin
	f, srv := genFactoryTLS(t, api)
	defer srv.Close()
	// The events printed are not kept: a buffer of them would grow with N.
	out, errOut := &tail{}, &bytes.Buffer{}
	streams := genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: out, ErrOut: errOut}
	root := cmd.NewCmdRoot(f, streams)
	root.SetArgs(args)

	h := startHeapPeak()
	err := root.ExecuteContext(t.Context())
	peak := h.stop()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("%s over %d: %v\n%s", strings.Join(args, " "), n, err, errOut)
	}
	if err := check(n, string(out.b)); err != nil {
		t.Fatalf("%s over %d: %v", strings.Join(args, " "), n, err)
	}
	return sub(peak, h.base)
}

// genFactory seeds api's workloads as created records in a new state
// database and returns a Factory on it whose clients talk to api.
func genFactory(t *testing.T, api *genapi.Server) (*cmd.Factory, *httptest.Server) {
	t.Helper()
	dir := t.TempDir()
	statePath := filepath.Join(dir, "state.db")
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
	f := cmd.NewFactory()
	f.Home = filepath.Join(dir, "home")
	f.Getenv = func(string) string { return "" }
	f.StateDBFlag = statePath
	f.NewClient = func(string) (kubernetes.Interface, error) {
		return kubernetes.NewForConfig(&rest.Config{Host: srv.URL, QPS: -1})
	}
	return f, srv
}

// genFactoryTLS is genFactory over TLS and HTTP/2, as a real API server
// serves, with the plugin's own clients (Factory.RESTConfig and its
// transport, from a kubeconfig) rather than test-made ones: the part of a
// stream the command has not read yet waits in the client's HTTP/2 buffers,
// in the heap measured (over HTTP/1.1 it waits in the kernel's socket
// buffer, and no client setting shows).
func genFactoryTLS(t *testing.T, api *genapi.Server) (*cmd.Factory, *httptest.Server) {
	t.Helper()
	f, plain := genFactory(t, api)
	plain.Close()
	srv := httptest.NewUnstartedServer(api)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: gen, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: gen, user: {token: gen}}]
contexts: [{name: gen, context: {cluster: gen, user: gen}}]
current-context: gen
`, srv.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	f.NewClient = nil
	f.ConfigFlags.KubeConfig = &kubeconfig
	return f, srv
}

// heapPeak samples the Go heap's objects every millisecond, from after a
// collection (base) until stop.
type heapPeak struct {
	base    uint64
	peak    atomic.Uint64
	quit    chan struct{}
	sampled chan struct{}
}

var heapObjects = []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}

// heapNow is the heap's objects now, in bytes.
func heapNow() uint64 {
	s := slices.Clone(heapObjects)
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func startHeapPeak() *heapPeak {
	runtime.GC()
	h := &heapPeak{base: heapNow(), quit: make(chan struct{}), sampled: make(chan struct{})}
	go func() {
		defer close(h.sampled)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			if v := heapNow(); v > h.peak.Load() {
				h.peak.Store(v)
			}
			select {
			case <-h.quit:
				return
			case <-tick.C:
			}
		}
	}()
	return h
}

// stop ends the sampling and returns the peak seen.
func (h *heapPeak) stop() uint64 {
	close(h.quit)
	<-h.sampled
	return h.peak.Load()
}

func sub(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return 0
}

// tail keeps the last 4 KiB written to it.
type tail struct{ b []byte }

func (t *tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 4096 {
		t.b = append(t.b[:0:0], t.b[len(t.b)-4096:]...)
	}
	return len(p), nil
}
