// Command bench is the scale benchmark of `make bench` (docs/performance.md). For each N it starts a
// kwok control plane of its own with an audit log (hack/cluster-up.sh --audit-log), creates N gobrave
// workloads with client-go (N/2 deployments, N/2 jobs; only a slice of -running, 1% of N, runs pods,
// the rest are deployments scaled to 0 and paused and suspended jobs; over -namespaces namespaces,
// 100 at every N: the same load shape at every N), records them in a state database with pkg/store,
// then measures, side by side in the same run and as real processes:
//
//   - `recover --once` of the plugin (every record changed while nothing watched);
//   - the limit: hack/bench/limit, a bare streaming watch-list of the same objects by a minimal client-go
//     program that drops every object;
//   - `kubectl get deploy,job -l gobrave-workload -o name` of the same objects;
//   - `ps` to /dev/null (N non-terminal records) and `ps -a` to its first row;
//   - `monitor --all --follow`: peak RSS, and the delay from a job's completion seen by the bench's
//     own watch to the monitor's line, with -latency-jobs held jobs released within about 5 s.
//
// Wall time, peak RSS (rusage, through hack/bench/launch) and CPU of each, API requests from the API
// server's audit log. It prints a markdown report on stdout (and to -out) and, with -charts, draws
// wall time and RSS against N (PNG and SVG). The cluster is always removed, on errors and on
// SIGINT/SIGTERM too. Linux only (peak RSS from rusage).
//
//	go run ./hack/bench -n 1000,10000 -plugin bin/kubectl-gobrave -out /tmp/bench.md -charts /tmp/charts
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// launcher is the built hack/bench/launch, which runs every measured command; limitBin the built
// hack/bench/limit.
var launcher, limitBin string

type options struct {
	ns          []int
	plugin      string
	out         string
	reps        int
	slowOnce    time.Duration
	latencyJobs int
	running     string
	nss         int
	pauseIdle   bool
	workers     int
	syncs       int
	limitMode   string
	charts      string
	skip        map[string]bool
	storeBench  bool
	root        string // repository root (hack/cluster-up.sh is found from it)
	profileDir  string
	baseline    string // another build of the plugin, run interleaved with -plugin (A/B)
	hold        bool
	serverGC    bool // collect the API server's garbage before each measured run (servergc.go)
	// latencyBaseline: a second plugin binary whose monitor runs side by side in the latency phase
	latencyBaseline string
}

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "charts":
			os.Exit(chartsMain(os.Args[2:]))
		case "record":
			os.Exit(recordMain(os.Args[2:]))
		case "profile":
			os.Exit(profileMain(os.Args[2:]))
		case "latwatch":
			os.Exit(latwatchMain(os.Args[2:])) // the latency phase's clock (latwatch.go)
		case "idle":
			os.Exit(0) // the floor of this binary's RSS, for the report
		}
	}
	var o options
	var ns, skip string
	flag.StringVar(&ns, "n", "1000,10000", "comma-separated numbers of gobrave workloads (half deployments, half jobs)")
	flag.StringVar(&o.plugin, "plugin", "bin/kubectl-gobrave", "the built plugin (make build)")
	flag.StringVar(&o.out, "out", "", "also write the markdown report to this file")
	flag.IntVar(&o.reps, "reps", 3, "runs of each plugin and kubectl measurement (the median is reported)")
	flag.DurationVar(&o.slowOnce, "slow-once", time.Minute, "kubectl get runs once when its first run takes longer than this (0: always -reps times)")
	flag.IntVar(&o.latencyJobs, "latency-jobs", 1000, "jobs released at once for the event-to-database latency (0: skip)")
	flag.StringVar(&o.latencyBaseline, "latency-baseline", "", "another plugin binary (e.g. main's) whose monitor --all --follow runs side by side with -plugin's in the latency phase, on its own copy of the database: an A/B on the same release")
	flag.StringVar(&o.running, "running", "1%", "workloads with a running pod (half deployments at 1 replica, half held jobs), a share of N (1%) or a number; the rest have none")
	flag.IntVar(&o.nss, "namespaces", 100, "namespaces bench-000, bench-001, ... the load spreads over, the same at every N (at most N/2; 0 or 1: all in namespace bench)")
	flag.BoolVar(&o.pauseIdle, "pause-idle", true, "create the deployments at 0 also paused, without a progress deadline (mapped the same; no ReplicaSets; the controller settles them with one write each); false: the controller makes a ReplicaSet for each, which 100,000 does not settle on 2 cores")
	flag.IntVar(&o.workers, "workers", 128, "concurrent creates")
	flag.IntVar(&o.syncs, "controller-syncs", 50, "the controller manager's concurrent deployment, replica set and job syncs (hack/cluster-up.sh --controller-syncs)")
	flag.StringVar(&o.limitMode, "limit-mode", "watch-list", "the limit program: watch-list (sendInitialEvents) or list (paginated)")
	flag.StringVar(&o.charts, "charts", "", "write the charts (wall time and RSS against N, PNG and SVG) into this folder")
	flag.StringVar(&skip, "skip", "", "comma-separated phases to skip: recover, limit, get, ps, latency")
	flag.BoolVar(&o.storeBench, "store-bench", true, "also run the store benchmarks (ApplyBatch, Ps10k) and report them")
	flag.StringVar(&o.profileDir, "profile-dir", "", "also profile recover --once and monitor --all (CPU, allocations, gctrace) into this folder")
	flag.StringVar(&o.baseline, "baseline", "", "another build of the plugin (e.g. main's): recover --once of it runs interleaved with -plugin's and the limit's, run by run, on the same cluster and database template (an A/B in one run)")
	flag.BoolVar(&o.serverGC, "server-gc", true, "start each measured run of recover, the limit and kubectl get on a freshly collected API server (GET /debug/pprof/heap?gc=1) and report its collections during each run: at 100,000 a run otherwise also pays for the garbage of the run before it")
	flag.BoolVar(&o.hold, "hold", false, "after the load is recorded, write the environment of the cluster (KUBECONFIG, HOME, ..., TEMPLATE_DB) to a file, log its path and wait until the file is removed (or SIGINT) before measuring: for experiments by hand on the same cluster")
	flag.Parse()
	for _, s := range strings.Split(ns, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 2 || n%2 != 0 || n > 1_999_998 {
			fmt.Fprintf(os.Stderr, "bench: -n wants even numbers >= 2, got %q\n", s)
			os.Exit(2)
		}
		o.ns = append(o.ns, n)
	}
	o.skip = map[string]bool{}
	for _, s := range strings.Split(skip, ",") {
		if s = strings.TrimSpace(s); s != "" {
			o.skip[s] = true
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		fatal(err)
	}
	o.root = wd
	if _, err := os.Stat(filepath.Join(o.root, "hack", "cluster-up.sh")); err != nil {
		fatal(fmt.Errorf("run from the repository root: %w", err))
	}
	if o.nss < 0 {
		fmt.Fprintf(os.Stderr, "bench: -namespaces wants 0 (one namespace) or more, got %d\n", o.nss)
		os.Exit(2)
	}
	if _, err := runningOf(o.running, 2); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(2)
	}
	if o.plugin, err = filepath.Abs(o.plugin); err != nil {
		fatal(err)
	}
	if _, err := os.Stat(o.plugin); err != nil {
		fatal(fmt.Errorf("%w (run make build first)", err))
	}
	if o.baseline != "" {
		if o.baseline, err = filepath.Abs(o.baseline); err != nil {
			fatal(err)
		}
		if _, err := os.Stat(o.baseline); err != nil {
			fatal(fmt.Errorf("-baseline: %w", err))
		}
	}
	if o.latencyBaseline != "" {
		if o.latencyBaseline, err = filepath.Abs(o.latencyBaseline); err != nil {
			fatal(err)
		}
		if _, err := os.Stat(o.latencyBaseline); err != nil {
			fatal(fmt.Errorf("-latency-baseline: %w", err))
		}
	}

	os.Exit(run(o))
}

// run measures and reports; its deferred clean-ups run before the exit.
func run(o options) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	tmp, err := os.MkdirTemp("", "gobrave-bench-launch.")
	if err != nil {
		fatal(err)
	}
	defer os.RemoveAll(tmp)
	launcher = filepath.Join(tmp, "launch")
	limitBin = filepath.Join(tmp, "limit")
	for pkg, out := range map[string]string{"./hack/bench/launch": launcher, "./hack/bench/limit": limitBin} {
		build := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
		build.Dir, build.Stdout, build.Stderr = o.root, os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			logf("build %s: %v", pkg, err)
			return 1
		}
	}
	// Every measured binary runs from a copy written with ordinary writes,
	// as krew's install (or a download) writes it. The Go linker writes its
	// output through a mapping, which leaves the file's page cache in large
	// folios; a process that maps such a file is charged whole 2 MiB
	// folios (FilePmdMapped) of text and rodata it never touched: 4-10 MiB
	// more RSS for the same binary (ps of an empty store: 45.8-47.3 MiB
	// linked, 36.1-36.5 copied).
	installed := []*string{&o.plugin, &limitBin}
	if o.baseline != "" {
		installed = append(installed, &o.baseline)
	}
	if o.latencyBaseline != "" {
		installed = append(installed, &o.latencyBaseline)
	}
	for i, p := range installed {
		// The copy keeps the name and the folder's name, which the report prints.
		dst := filepath.Join(tmp, "installed", strconv.Itoa(i), filepath.Base(filepath.Dir(*p)), filepath.Base(*p))
		if err := install(*p, dst); err != nil {
			logf("install %s: %v", *p, err)
			return 1
		}
		*p = dst
	}
	rep := &report{started: time.Now()}
	rep.env = environment(ctx, o)
	if o.storeBench {
		logf("store benchmarks: go test -bench (ApplyBatch, Ps10k) ./pkg/store/")
		rep.store, err = storeBenchmarks(ctx, o.root)
		if err != nil {
			logf("store benchmarks failed: %v", err)
		}
	}
	for _, n := range o.ns {
		r, err := runScale(ctx, o, n)
		if r != nil {
			rep.scales = append(rep.scales, r)
			var part strings.Builder
			r.markdown(func(format string, args ...any) { fmt.Fprintf(&part, format, args...) })
			logf("N=%d done:\n%s", n, part.String())
		}
		if err != nil {
			logf("N=%d: %v", n, err)
			rep.errors = append(rep.errors, fmt.Sprintf("N=%d: %v", n, err))
		}
		if ctx.Err() != nil {
			break
		}
	}
	rep.total = time.Since(rep.started)
	if o.charts != "" && len(rep.scales) > 0 {
		files, err := writeCharts(o.charts, rep.scales)
		if err != nil {
			logf("charts: %v", err)
			rep.errors = append(rep.errors, fmt.Sprintf("charts: %v", err))
		}
		// The report links them relative to its own folder, so they show where it is kept.
		for _, f := range files {
			if o.out != "" {
				if rel, err := filepath.Rel(filepath.Dir(o.out), f); err == nil {
					f = rel
				}
			}
			rep.charts = append(rep.charts, f)
		}
	}
	md := rep.markdown()
	fmt.Print(md)
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(md), 0o644); err != nil {
			logf("%v", err)
			return 1
		}
		logf("report written to %s", o.out)
	}
	if len(rep.errors) > 0 || ctx.Err() != nil {
		return 1
	}
	return 0
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench %s: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func fatal(err error) {
	fmt.Fprintf(os.Stderr, "bench: %v\n", err)
	os.Exit(1)
}

// install copies the executable src to dst with ordinary writes (see run).
func install(src, dst string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o700)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}()
	// Plain reads and writes of 32 KiB, as krew's extraction from its
	// archive does (not copy_file_range, which io.Copy between files uses).
	_, err = io.Copy(struct{ io.Writer }{out}, struct{ io.Reader }{in})
	return err
}
