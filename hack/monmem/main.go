// Command monmem measures the peak RSS of `kubectl gobrave monitor --all
// --follow` over N workloads served by a generated API server
// (internal/genapi: each object generated as it is written, running, with
// the gobrave.dev/spec annotation and managedFields), without a cluster:
//
//	go run ./hack/monmem -n 100000 -plugin bin/kubectl-gobrave
//
// It seeds a state database with the N records (created, not started; kept
// in -cache and copied for each run), starts the server, runs the plugin
// against it and reads its stdout until the plugin has printed the N events
// it records (every workload started): the informers have synced and every
// observation is in the database. Then it reads the plugin's peak RSS
// (VmHWM), waits -settle (the monitor's first polls of the history after
// the sync: the benchmark's RSS is the peak over the whole phase, and these
// come within it) and reads it again, with its CPU time and the requests it
// made, and stops it (SIGTERM). It also prints the peak of the whole life,
// the way out included (ru_maxrss), which is what the scale benchmark
// reports: releasing 100,000 leases at once once took it 26 MiB above the
// peak while monitoring.
//
// With -inproc the command runs in this process instead, and the program
// writes a heap profile (-heapprofile) at the highest in-use heap it
// samples, to see what the peak is made of.
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/gobrave/kubectl-gobrave/internal/genapi"
	"github.com/gobrave/kubectl-gobrave/internal/memprobe"
	"github.com/gobrave/kubectl-gobrave/pkg/cmd"
)

func main() {
	n := flag.Int("n", 10000, "workloads (half deployments, half jobs)")
	nss := flag.Int("namespaces", 100, "namespaces they are spread over")
	plugin := flag.String("plugin", "bin/kubectl-gobrave", "the built plugin")
	cache := flag.String("cache", filepath.Join(os.TempDir(), "monmem"), "where the seeded databases are kept")
	inproc := flag.Bool("inproc", false, "run the command in this process and profile its heap")
	heapProfile := flag.String("heapprofile", "", "with -inproc: write the heap profile at the sampled peak here")
	flag.DurationVar(&settle, "settle", 3*time.Second, "how long the plugin runs on after the N-th event before its peak RSS is read again")
	flag.Parse()
	if err := run(*n, *nss, *plugin, *cache, *inproc, *heapProfile); err != nil {
		fmt.Fprintln(os.Stderr, "monmem:", err)
		os.Exit(1)
	}
}

// settle is -settle.
var settle time.Duration

func run(n, nss int, plugin, cacheDir string, inproc bool, heapProfile string) error {
	ctx := context.Background()
	srv := &genapi.Server{N: n, Namespaces: nss}
	seed, err := memprobe.Seeded(ctx, srv, cacheDir)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "monmem-run")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db := filepath.Join(dir, "state.db")
	if err := memprobe.CopyFile(seed, db); err != nil {
		return err
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: gen, cluster: {server: %q}}]
users: [{name: gen, user: {token: gen}}]
contexts: [{name: gen, context: {cluster: gen, user: gen}}]
current-context: gen
`, hs.URL)), 0o600); err != nil {
		return err
	}
	args := []string{"monitor", "--all", "--follow", "-o", "json", "--state-db", db, "--kubeconfig", kc}
	if inproc {
		return runInProc(ctx, args, n, dir, heapProfile, srv)
	}

	c := exec.Command(plugin, args...)
	c.Env = append(os.Environ(), "HOME="+dir, "GOBRAVE_HOME="+dir)
	out, err := c.StdoutPipe()
	if err != nil {
		return err
	}
	var errOut bytes.Buffer
	c.Stderr = &errOut
	if p := os.Getenv("MONMEM_STDERR"); p != "" {
		// e.g. with GODEBUG=gctrace=1: the plugin's stderr to this file too
		f, err := os.Create(p)
		if err != nil {
			return err
		}
		defer f.Close()
		c.Stderr = io.MultiWriter(&errOut, f)
	}
	start := time.Now()
	if err := c.Start(); err != nil {
		return err
	}
	lines := 0
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for lines < n && sc.Scan() {
		lines++
	}
	took := time.Since(start)
	hwmAtN := vmHWM(c.Process.Pid)
	go func() { _, _ = io.Copy(io.Discard, out) }()
	time.Sleep(settle)
	hwm := vmHWM(c.Process.Pid)
	rss := rssParts(c.Process.Pid)
	_ = c.Process.Signal(syscall.SIGTERM)
	werr := c.Wait()
	if lines < n {
		return fmt.Errorf("the plugin printed %d of %d events (%v): %s", lines, n, werr, errOut.String())
	}
	cpu := c.ProcessState.UserTime() + c.ProcessState.SystemTime()
	// The peak of the whole life, the way out included (ru_maxrss, KiB
	// on Linux): what the scale benchmark reports, through hack/bench/launch.
	var life int64 = -1
	if ru, ok := c.ProcessState.SysUsage().(*syscall.Rusage); ok {
		life = ru.Maxrss
	}
	fmt.Printf("N=%d namespaces=%d: %d events in %s; peak RSS %.1f MiB (%.1f at the N-th event, then %s more; %.1f until it exited); CPU %.2f s (to the end); %d API requests; load %s; RSS then %s\n",
		n, nss, lines, took.Round(10*time.Millisecond), float64(hwm)/1024, float64(hwmAtN)/1024, settle, float64(life)/1024, cpu.Seconds(), srv.Requests.Load(), memprobe.Loadavg(), rss)
	return nil
}

// runInProc runs the command in this process until it has printed n lines,
// sampling the in-use heap; the heap profile is written at its peak.
func runInProc(ctx context.Context, args []string, n int, dir, heapProfile string, srv *genapi.Server) error {
	counter := &lineCounter{want: int64(n), done: make(chan struct{})}
	f := cmd.NewFactory()
	f.Home = filepath.Join(dir, "home")
	f.Getenv = func(string) string { return "" }
	streams := genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: counter, ErrOut: os.Stderr}
	root := cmd.NewCmdRoot(f, streams)
	root.SetArgs(args)
	goruntime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	base := s[0].Value.Uint64()
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	start := time.Now()
	go func() { errc <- root.ExecuteContext(cctx) }()
	var peak uint64
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var lastProfile uint64
loop:
	for {
		select {
		case <-counter.done:
			break loop
		case err := <-errc:
			cancel()
			return fmt.Errorf("the command ended: %v", err)
		case <-tick.C:
			metrics.Read(s)
			v := s[0].Value.Uint64()
			peak = max(peak, v)
			if heapProfile != "" && v > lastProfile+lastProfile/10 {
				lastProfile = v
				if pf, err := os.Create(heapProfile); err == nil {
					_ = pprof.Lookup("heap").WriteTo(pf, 0)
					pf.Close()
				}
			}
		}
	}
	took := time.Since(start)
	if heapProfile != "" {
		// and what is live once every event is recorded
		goruntime.GC()
		if pf, err := os.Create(heapProfile + ".end"); err == nil {
			_ = pprof.Lookup("heap").WriteTo(pf, 0)
			pf.Close()
		}
	}
	cancel()
	err := <-errc
	_ = f.Close()
	fmt.Printf("in process, N=%d: %d events in %s; peak heap objects %.1f MiB above %.1f MiB; %d API requests (err %v)\n",
		n, counter.lines.Load(), took.Round(10*time.Millisecond), float64(peak-base)/(1<<20), float64(base)/(1<<20), srv.Requests.Load(), err)
	return nil
}

// lineCounter counts lines written; done closes at want.
type lineCounter struct {
	want   int64
	lines  atomic.Int64
	done   chan struct{}
	closed atomic.Bool
}

func (c *lineCounter) Write(p []byte) (int, error) {
	if c.lines.Add(int64(bytes.Count(p, []byte("\n")))) >= c.want && c.closed.CompareAndSwap(false, true) {
		close(c.done)
	}
	return len(p), nil
}

// vmHWM is the peak RSS of pid in KiB (-1 when the process is gone).
func vmHWM(pid int) int64 {
	if kib, ok := memprobe.Status(pid)["VmHWM"]; ok {
		return kib
	}
	return -1
}

// rssParts is the anonymous, file-backed and shared parts of pid's RSS.
func rssParts(pid int) string {
	st := memprobe.Status(pid)
	if st == nil {
		return "?"
	}
	var parts []string
	for _, k := range []string{"RssAnon", "RssFile", "RssShmem"} {
		parts = append(parts, fmt.Sprintf("%s: %d kB", k, st[k]))
	}
	return strings.Join(parts, ", ")
}
