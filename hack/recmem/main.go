//go:build linux

// Command recmem measures the peak RSS of `kubectl gobrave recover --once`
// over N workloads served by a generated API server (internal/genapi: each
// object generated as it is written, running, with the gobrave.dev/spec
// annotation and managedFields), without a cluster:
//
//	go run ./hack/recmem -n 100000 -plugin bin/kubectl-gobrave
//	go run ./hack/recmem -n 100000 -plugin /tmp/main-plugin,bin/kubectl-gobrave -reps 3
//
// It seeds a state database with the N records as created, not started
// (genapi.Server.Seed; kept in -cache and copied for each run). The server
// serves every workload running, so each record has changed while nothing
// watched and recover records N transitions, as in `make bench`. It runs
// the plugin's `recover --once --state-db COPY` against the server, samples
// /proc/PID/status every -sample (VmHWM, and RssAnon/RssFile/RssShmem at the
// highest VmRSS seen), and prints the peak, the split at the peak, the CPU
// time (user+system, from the kernel at exit), the wall time and the
// requests. With several comma-separated -plugin binaries and -reps > 1 the
// runs are interleaved (A B A B ...), so that the load of the machine hits
// them alike; the medians close the output.
//
// The server serves client-go protobuf to the plugin, as a real API server
// does (-protobuf=false: JSON, which decodes with about twice the CPU and
// garbage), and streams each watch-list in key order (namespace, then name),
// as a real API server's watch cache does (-keyorder=false: creation order,
// which interleaves the namespaces). Its objects are all running and carry
// the spec annotation and managedFields; the bench's load (mostly idle
// deployments and suspended jobs) differs: compare the numbers here with
// each other (A/B), and with `make bench` only as a shape.
//
// To profile the plugin here, pass as -plugin a script that runs
// `go run ./hack/bench profile -cpuprofile FILE -- "$@"` (a build of it).
//
// With -inproc the command runs in this process instead, and the program
// writes a heap profile (-heapprofile) at the highest in-use heap it samples
// (and FILE.end after a collection at the end), to see what the peak is made of.
package main

import (
	"bytes"
	"context"
	"encoding/binary"
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
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/gobrave/kubectl-gobrave/internal/genapi"
	"github.com/gobrave/kubectl-gobrave/internal/holdenv"
	"github.com/gobrave/kubectl-gobrave/internal/memprobe"
	"github.com/gobrave/kubectl-gobrave/pkg/cmd"
)

func main() {
	n := flag.Int("n", 10000, "workloads (half deployments, half jobs)")
	nss := flag.Int("namespaces", 100, "namespaces they are spread over (the bench's default)")
	plugin := flag.String("plugin", "bin/kubectl-gobrave", "the built plugin; several, comma-separated, to compare them (A/B); PATH@K=V;K=V adds environment variables (e.g. GOMEMLIMIT) to that run")
	reps := flag.Int("reps", 1, "runs of each plugin, interleaved")
	sample := flag.Duration("sample", 2*time.Millisecond, "how often /proc/PID/status is read")
	cache := flag.String("cache", filepath.Join(os.TempDir(), "recmem"), "where the seeded databases are kept")
	inproc := flag.Bool("inproc", false, "run the command in this process and profile its heap")
	heapProfile := flag.String("heapprofile", "", "with -inproc: write the heap profile at the sampled peak here")
	profileRate := flag.Int("memprofilerate", 0, "with -inproc: runtime.MemProfileRate (bytes between samples; 0 keeps Go's 512 KiB, too coarse to see a map of a few MiB)")
	smaps = flag.String("smaps", "", "write /proc/PID/smaps at the highest VmRSS sampled here (what each mapping holds)")
	pagemap = flag.String("pagemap", "", "write the resident pages of the plugin's executable at the highest VmRSS sampled here, one line a page: its address and the mapping's permissions (attribute them with `go tool nm -size` of an unstripped build; see residentPages)")
	useTLS = flag.Bool("tls", false, "serve HTTP/2 over TLS, as a real API server does (the client's HTTP/2 flow-control buffers count then)")
	realEnv = flag.String("real", "", "run against a real cluster instead: the environment file `hack/bench -hold` writes (its KUBECONFIG, HOME, ... for the plugin, its TEMPLATE_DB as the database; -n must be the load's N)")
	protobuf := flag.Bool("protobuf", true, "serve protobuf to clients that accept it (as a real API server does); false: JSON only")
	keyOrder := flag.Bool("keyorder", true, "stream lists in key order (namespace, then name) as a real API server does; false: creation order")
	extra := flag.String("args", "", "more arguments for recover, space-separated (e.g. \"-o json\")")
	flag.Parse()
	if *profileRate > 0 {
		goruntime.MemProfileRate = *profileRate
	}
	genOpts = func(s *genapi.Server) { s.Protobuf, s.KeyOrder = *protobuf, *keyOrder }
	if err := run(*n, *nss, strings.Split(*plugin, ","), *reps, *sample, *cache, *inproc, *heapProfile, strings.Fields(*extra)); err != nil {
		fmt.Fprintln(os.Stderr, "recmem:", err)
		os.Exit(1)
	}
}

var (
	genOpts func(*genapi.Server)
	smaps   *string
	pagemap *string
	useTLS  *bool
	realEnv *string
)

// result is one run's measurement.
type result struct {
	plugin                 string
	hwm, anon, file, shmem int64 // KiB; anon/file/shmem at the highest VmRSS sampled
	cpu, user, sys, wall   time.Duration
	requests               int64
	summary                string
}

func run(n, nss int, plugins []string, reps int, every time.Duration, cacheDir string, inproc bool, heapProfile string, extra []string) error {
	ctx := context.Background()
	if *realEnv != "" {
		return runReal(n, plugins, reps, every, *realEnv, extra)
	}
	srv := &genapi.Server{N: n, Namespaces: nss}
	genOpts(srv)
	seed, err := memprobe.Seeded(ctx, srv, cacheDir)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "recmem-run")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	hs := httptest.NewUnstartedServer(srv)
	insecure := ""
	if *useTLS {
		hs.EnableHTTP2 = true
		hs.StartTLS()
		insecure = ", insecure-skip-tls-verify: true"
	} else {
		hs.Start()
	}
	defer hs.Close()
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: gen, cluster: {server: %q%s}}]
users: [{name: gen, user: {token: gen}}]
contexts: [{name: gen, context: {cluster: gen, user: gen}}]
current-context: gen
`, hs.URL, insecure)), 0o600); err != nil {
		return err
	}
	db := filepath.Join(dir, "state.db")
	args := append([]string{"recover", "--once", "--state-db", db, "--kubeconfig", kc}, extra...)
	if inproc {
		if err := memprobe.CopyFile(seed, db); err != nil {
			return err
		}
		return runInProc(ctx, args, n, dir, heapProfile, srv)
	}
	byPlugin := map[string][]result{}
	for r := range reps {
		for _, p := range plugins {
			// a fresh copy each run: every record changed again
			for _, suffix := range []string{"", "-wal", "-shm"} {
				_ = os.Remove(db + suffix)
			}
			if err := memprobe.CopyFile(seed, db); err != nil {
				return err
			}
			before := srv.Requests.Load()
			res, err := runOne(p, args, dir, every, nil)
			if err != nil {
				return err
			}
			res.requests = srv.Requests.Load() - before
			if err := checked(res, n); err != nil {
				return err
			}
			byPlugin[p] = append(byPlugin[p], res)
			printRun(n, r, res)
		}
	}
	printMedians(n, plugins, reps, byPlugin)
	return nil
}

// checked fails unless the run recorded a change of every one of the n records.
func checked(res result, n int) error {
	if !strings.Contains(res.summary, fmt.Sprintf("changed %d,", n)) && !strings.Contains(res.summary, fmt.Sprintf(`"changed": %d`, n)) {
		return fmt.Errorf("%s printed %q, want every one of the %d records changed", res.plugin, res.summary, n)
	}
	return nil
}

func printRun(n, r int, res result) {
	fmt.Printf("N=%d run %d %s: peak RSS %.1f MiB (at the peak: anon %.1f, file %.1f, shmem %.1f); CPU %.2f s (user %.2f, sys %.2f); wall %.2f s; %d requests; load %s\n",
		n, r+1, res.plugin, mib(res.hwm), mib(res.anon), mib(res.file), mib(res.shmem), res.cpu.Seconds(), res.user.Seconds(), res.sys.Seconds(), res.wall.Seconds(), res.requests, memprobe.Loadavg())
}

// runReal is run against the cluster of a `hack/bench -hold` environment file: each run
// recovers a fresh copy of its TEMPLATE_DB with the file's environment (requests are not
// counted: the API server's audit log has them).
func runReal(n int, plugins []string, reps int, every time.Duration, envFile string, extra []string) error {
	env, template, err := holdenv.Read(envFile)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "recmem-real")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db := filepath.Join(dir, "state.db")
	args := append([]string{"recover", "--once", "--state-db", db}, extra...)
	byPlugin := map[string][]result{}
	for r := range reps {
		for _, p := range plugins {
			for _, suffix := range []string{"", "-wal", "-shm"} {
				_ = os.Remove(db + suffix)
			}
			if err := memprobe.CopyFile(template, db); err != nil {
				return err
			}
			res, err := runOne(p, args, dir, every, env)
			if err != nil {
				return err
			}
			if err := checked(res, n); err != nil {
				return err
			}
			byPlugin[p] = append(byPlugin[p], res)
			printRun(n, r, res)
		}
	}
	printMedians(n, plugins, reps, byPlugin)
	return nil
}

// printMedians closes an A/B run with each plugin's medians.
func printMedians(n int, plugins []string, reps int, byPlugin map[string][]result) {
	if reps > 1 {
		for _, p := range plugins {
			rs := byPlugin[p]
			med := func(f func(result) float64) float64 {
				v := make([]float64, len(rs))
				for i, r := range rs {
					v[i] = f(r)
				}
				slices.Sort(v)
				return v[len(v)/2]
			}
			fmt.Printf("N=%d median of %d %s: peak RSS %.1f MiB (anon %.1f, file %.1f); CPU %.2f s; wall %.2f s\n", n, len(rs), p,
				med(func(r result) float64 { return mib(r.hwm) }), med(func(r result) float64 { return mib(r.anon) }), med(func(r result) float64 { return mib(r.file) }),
				med(func(r result) float64 { return r.cpu.Seconds() }), med(func(r result) float64 { return r.wall.Seconds() }))
		}
	}
}

// runOne runs the plugin once, sampling its memory until it exits.
// With base (a cluster's environment) the plugin runs with it instead of HOME=dir.
func runOne(plugin string, args []string, dir string, every time.Duration, base []string) (result, error) {
	res := result{plugin: plugin}
	path, env, _ := strings.Cut(plugin, "@")
	c := exec.Command(path, args...)
	c.Env = append(os.Environ(), "HOME="+dir, "GOBRAVE_HOME="+dir)
	if base != nil {
		c.Env = append(os.Environ(), base...)
	}
	if env != "" {
		c.Env = append(c.Env, strings.Split(env, ";")...)
	}
	out := &tail{}
	var errOut bytes.Buffer
	c.Stdout = out
	c.Stderr = &errOut
	if p := os.Getenv("RECMEM_STDERR"); p != "" {
		// e.g. with GODEBUG=gctrace=1: the plugin's stderr to this file too
		f, err := os.Create(p)
		if err != nil {
			return res, err
		}
		defer f.Close()
		c.Stderr = io.MultiWriter(&errOut, f)
	}
	start := time.Now()
	if err := c.Start(); err != nil {
		return res, err
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	tick := time.NewTicker(every)
	defer tick.Stop()
	var rss int64
	status := fmt.Sprintf("/proc/%d/status", c.Process.Pid)
	for {
		select {
		case err := <-done:
			res.wall = time.Since(start)
			if err != nil {
				return res, fmt.Errorf("%s: %v: %s", plugin, err, errOut.String())
			}
			// Not ru_maxrss: Go starts the child with clone(CLONE_VM|CLONE_VFORK), and
			// Linux carries this program's own peak into the child's ru_maxrss at exec
			// (see hack/bench/launch). VmHWM is the child's own memory's, and monotonic:
			// the last sample misses at most the final -sample of the run.
			res.user, res.sys = c.ProcessState.UserTime(), c.ProcessState.SystemTime()
			res.cpu = res.user + res.sys
			res.summary = lastLine(string(out.b))
			return res, nil
		case <-tick.C:
			f := memprobe.StatusFile(status)
			if f == nil {
				continue
			}
			res.hwm = max(res.hwm, f["VmHWM"])
			if f["VmRSS"] > rss {
				rss = f["VmRSS"]
				res.anon, res.file, res.shmem = f["RssAnon"], f["RssFile"], f["RssShmem"]
				if *smaps != "" {
					if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", c.Process.Pid)); err == nil {
						_ = os.WriteFile(*smaps, b, 0o644)
					}
				}
				if *pagemap != "" {
					if b, err := residentPages(c.Process.Pid, path); err == nil {
						_ = os.WriteFile(*pagemap, b, 0o644)
					}
				}
			}
		}
	}
}

// runInProc runs the command in this process, sampling the in-use heap; the
// heap profile is written at its peak.
func runInProc(ctx context.Context, args []string, n int, dir, heapProfile string, srv *genapi.Server) error {
	f := cmd.NewFactory()
	f.Home = filepath.Join(dir, "home")
	f.Getenv = func(string) string { return "" }
	out := &tail{}
	streams := genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: out, ErrOut: os.Stderr}
	root := cmd.NewCmdRoot(f, streams)
	root.SetArgs(args)
	goruntime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}, {Name: "/memory/classes/total:bytes"}}
	metrics.Read(s)
	base := s[0].Value.Uint64()
	errc := make(chan error, 1)
	start := time.Now()
	go func() { errc <- root.ExecuteContext(ctx) }()
	var peak, peakTotal uint64
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	var lastProfile uint64
	var err error
loop:
	for {
		select {
		case err = <-errc:
			break loop
		case <-tick.C:
			metrics.Read(s)
			v := s[0].Value.Uint64()
			peak = max(peak, v)
			peakTotal = max(peakTotal, s[3].Value.Uint64())
			if heapProfile != "" && v > lastProfile+lastProfile/20 {
				lastProfile = v
				if pf, err := os.Create(heapProfile); err == nil {
					_ = pprof.Lookup("heap").WriteTo(pf, 0)
					pf.Close()
				}
			}
		}
	}
	took := time.Since(start)
	_ = f.Close()
	metrics.Read(s)
	if heapProfile != "" {
		goruntime.GC()
		if pf, err := os.Create(heapProfile + ".end"); err == nil {
			_ = pprof.Lookup("heap").WriteTo(pf, 0)
			pf.Close()
		}
	}
	fmt.Printf("in process, N=%d: %s in %s; peak heap objects %.1f MiB above %.1f MiB; peak runtime total %.1f MiB; GOGC %d, GOMEMLIMIT %d; %d API requests (err %v)\n",
		n, lastLine(string(out.b)), took.Round(10*time.Millisecond), float64(peak-base)/(1<<20), float64(base)/(1<<20), float64(peakTotal)/(1<<20),
		s[1].Value.Uint64(), s[2].Value.Uint64(), srv.Requests.Load(), err)
	return err
}

// tail keeps the last 4 KiB written to it.
type tail struct {
	b []byte
	n atomic.Int64
}

func (t *tail) Write(p []byte) (int, error) {
	t.n.Add(int64(len(p)))
	t.b = append(t.b, p...)
	if len(t.b) > 4096 {
		t.b = append(t.b[:0:0], t.b[len(t.b)-4096:]...)
	}
	return len(p), nil
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndex(s, "\n"); i >= 0 {
		return s[i+1:]
	}
	return s
}

func mib(kib int64) float64 { return float64(kib) / 1024 }

// residentPages lists the pages of the mappings of exe (the executable's
// text, read-only data and data) that are resident in process pid, from
// /proc/PID/pagemap (bit 63: present; root sees it): "ADDRESS PERMS" a
// line, the address in hex. With an unstripped build of the same source the
// addresses are those of `go tool nm`, so that the resident text can be
// attributed to packages.
func residentPages(pid int, exe string) ([]byte, error) {
	abs, err := filepath.Abs(exe)
	if err != nil {
		return nil, err
	}
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return nil, err
	}
	pm, err := os.Open(fmt.Sprintf("/proc/%d/pagemap", pid))
	if err != nil {
		return nil, err
	}
	defer pm.Close()
	page := uint64(os.Getpagesize())
	var out bytes.Buffer
	for _, line := range strings.Split(string(maps), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || f[5] != abs {
			continue
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		n := (end - start) / page
		buf := make([]byte, 8*n)
		if _, err := pm.ReadAt(buf, int64(start/page*8)); err != nil {
			return nil, err
		}
		for i := range n {
			if binary.LittleEndian.Uint64(buf[8*i:])&(1<<63) != 0 {
				fmt.Fprintf(&out, "%x %s\n", start+i*page, f[1])
			}
		}
	}
	return out.Bytes(), nil
}
