package cmd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gobrave/kubectl-gobrave/pkg/cmd"
	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// TestRecoverOnceMemoryIsFlat: `recover --once` over 2,000 and over 20,000
// (400 and 4,000 under -race)
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
		small, large = 400, 4000 // the same ratio; 22,000 records take minutes under -race
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
		small, large = 400, 4000
	}
	checkFlat(t, small, large, []string{"ps", "--refresh", "--state", "running", "-o", "name"}, func(n int, text string) error {
		// Only a refreshed record is running; the last row is the last job.
		_, name, _ := objName(n - 1)
		want := runtimeid.ID{Runtime: runtimeid.RuntimeK8s, Namespace: "mem", Kind: runtimeid.KindJob, Name: name}.String() + "\n"
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
	if os.Getenv(flatChildEnv) == "" {
		c := exec.Command(os.Args[0], "-test.run", "^"+t.Name()+"$", "-test.count=1", "-test.v")
		c.Env = append(os.Environ(), flatChildEnv+"=1")
		out, err := c.CombinedOutput()
		t.Logf("%s in its own process:\n%s", t.Name(), out)
		if err != nil {
			t.Fatalf("%s in its own process: %v", t.Name(), err)
		}
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

// flatChildEnv marks the process checkFlat runs its measurement in.
const flatChildEnv = "GOBRAVE_TEST_FLAT_CHILD"

// commandPeak seeds n records and objects and returns the peak heap of
// recover --once above the heap before it.
func commandPeak(t *testing.T, n int, args []string, check func(n int, out string) error) uint64 {
	t.Helper()
	const ns = "mem"
	dir := t.TempDir()
	statePath := filepath.Join(dir, "state.db")
	st, err := store.Open(t.Context(), statePath)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		kind, name, uid := objName(i)
		id := runtimeid.ID{Runtime: runtimeid.RuntimeK8s, Namespace: ns, Kind: kind, Name: name}
		w := store.Workload{RuntimeID: id.String(), Runtime: id.Runtime, Namespace: ns, Kind: kind, Name: name, UID: uid, State: store.StateCreated}
		if err := st.Put(t.Context(), w, store.Transition{Type: store.Created, UID: uid}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(&streamingAPI{n: n})
	defer srv.Close()

	f := cmd.NewFactory()
	f.Home = filepath.Join(dir, "home")
	f.Getenv = func(string) string { return "" }
	f.StateDBFlag = statePath
	f.NewClient = func(string) (kubernetes.Interface, error) {
		return kubernetes.NewForConfig(&rest.Config{Host: srv.URL, QPS: -1})
	}
	// The events printed are not kept: a buffer of them would grow with N.
	out, errOut := &tail{}, &bytes.Buffer{}
	streams := genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: out, ErrOut: errOut}
	root := cmd.NewCmdRoot(f, streams)
	root.SetArgs(args)

	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	base := sample[0].Value.Uint64()
	var peak atomic.Uint64
	ctx, stop := context.WithCancel(t.Context())
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
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	err = root.ExecuteContext(t.Context())
	stop()
	<-sampled
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("%s over %d: %v\n%s", strings.Join(args, " "), n, err, errOut)
	}
	if err := check(n, string(out.b)); err != nil {
		t.Fatalf("%s over %d: %v", strings.Join(args, " "), n, err)
	}
	if p := peak.Load(); p > base {
		return p - base
	}
	return 0
}

// objName is the i-th object: even ones deployments, odd ones jobs.
func objName(i int) (kind, name, uid string) {
	if i%2 == 0 {
		return runtimeid.KindDeployment, fmt.Sprintf("svc-%06d", i), fmt.Sprintf("uid-d-%06d", i)
	}
	return runtimeid.KindJob, fmt.Sprintf("task-%06d", i), fmt.Sprintf("uid-j-%06d", i)
}

// streamingAPI serves n/2 running deployments and n/2 running jobs in
// namespace "mem", and no pods or ReplicaSets, generating each object as
// it writes it: lists (paginated by limit/continue), watch-lists
// (sendInitialEvents, then the initial-events-end bookmark, then nothing
// until the client goes), plain watches, and GETs.
type streamingAPI struct{ n int }

func (a *streamingAPI) object(kind string, i int) any {
	_, name, uid := objName(i)
	meta := metav1.ObjectMeta{Name: name, Namespace: "mem", UID: types.UID(uid), Generation: 1, ResourceVersion: "10",
		Labels: map[string]string{"gobrave-workload": name}}
	if kind == "deployments" {
		return &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}, ObjectMeta: meta,
			Spec:   appsv1.DeploymentSpec{Replicas: ptr(int32(1))},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}}
	}
	return &batchv1.Job{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"}, ObjectMeta: meta,
		Status: batchv1.JobStatus{Active: 1, Ready: ptr(int32(1))}}
}

// indexes are the object numbers of a resource.
func (a *streamingAPI) indexes(resource string) []int {
	var out []int
	for i := range a.n {
		if resource == "deployments" && i%2 == 0 || resource == "jobs" && i%2 == 1 {
			out = append(out, i)
		}
	}
	return out
}

var listKinds = map[string][2]string{
	"deployments": {"apps/v1", "Deployment"}, "jobs": {"batch/v1", "Job"},
	"pods": {"v1", "Pod"}, "replicasets": {"apps/v1", "ReplicaSet"},
}

func (a *streamingAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	// .../namespaces/mem/RESOURCE[/NAME] or .../RESOURCE
	var resource, name string
	for i, p := range parts {
		if _, ok := listKinds[p]; ok {
			resource = p
			if i+1 < len(parts) {
				name = parts[i+1]
			}
		}
	}
	gv, ok := listKinds[resource]
	if !ok {
		http.NotFound(w, r)
		return
	}
	idx := a.indexes(resource)
	w.Header().Set("Content-Type", "application/json")
	q := r.URL.Query()
	enc := json.NewEncoder(w)
	switch {
	case name != "":
		for _, i := range idx {
			if _, n, _ := objName(i); n == name {
				_ = enc.Encode(a.object(resource, i))
				return
			}
		}
		w.WriteHeader(http.StatusNotFound)
		_ = enc.Encode(metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: "Failure", Reason: metav1.StatusReasonNotFound, Code: 404})
	case q.Get("watch") == "true" || q.Get("watch") == "1":
		fl, _ := w.(http.Flusher)
		if q.Get("sendInitialEvents") == "true" {
			for _, i := range idx {
				_ = enc.Encode(map[string]any{"type": "ADDED", "object": a.object(resource, i)})
			}
			_ = enc.Encode(map[string]any{"type": "BOOKMARK", "object": map[string]any{"apiVersion": gv[0], "kind": gv[1],
				"metadata": map[string]any{"resourceVersion": "10", "annotations": map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}})
		}
		if fl != nil {
			fl.Flush()
		}
		<-r.Context().Done()
	default:
		from, _ := strconv.Atoi(q.Get("continue"))
		limit, _ := strconv.Atoi(q.Get("limit"))
		to := len(idx)
		if limit > 0 && from+limit < to {
			to = from + limit
		}
		cont := ""
		if to < len(idx) {
			cont = strconv.Itoa(to)
		}
		fmt.Fprintf(w, `{"apiVersion":%q,"kind":%q,"metadata":{"resourceVersion":"10","continue":%q},"items":[`, gv[0], gv[1]+"List", cont)
		for k, i := range idx[from:to] {
			if k > 0 {
				fmt.Fprint(w, ",")
			}
			b, _ := json.Marshal(a.object(resource, i))
			_, _ = w.Write(b)
		}
		fmt.Fprint(w, "]}")
	}
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
