//go:build linux

// Command monreal measures `kubectl gobrave monitor --all --follow` against a
// real cluster held by `hack/bench -hold`, by phase: its RSS while the
// workload informers list (until both have synced), while the snapshot pass
// records the initial state (until -n events are printed), and after (for
// -settle, then SIGTERM and the way out):
//
//	go run ./hack/bench -n 100000 -hold -skip recover,limit,get,ps ... &
//	go run ./hack/monreal -env /tmp/gobrave-bench.X/hold.env -n 100000 \
//	    -plugin "/tmp/main-kg /tmp/new-kg" -reps 3 -out /tmp/monreal
//
// Each run gets a fresh copy of the hold file's TEMPLATE_DB. /proc/PID/status
// is sampled every -sample: VmHWM, and VmRSS, RssAnon and RssFile by phase;
// /proc/PID/smaps is saved at the highest RssAnon (each 1 MiB step), and a
// timeline (one line a second: events printed, VmRSS, RssAnon, RssFile) and
// the plugin's stderr (-v=4: the informers' syncs and the writer's batches)
// go to -out. CPU is the kernel's user+system time at exit. Several
// space-separated -plugin binaries run interleaved, their order rotated each
// round; PATH@K=V;K=V adds environment to a binary's runs (GODEBUG=gctrace=1,
// or GOBRAVE_HEAP_PROFILE with a -tags gobraveprof build). Copy each binary
// with cp before comparing RSS (hack/bench's install note).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gobrave/kubectl-gobrave/internal/holdenv"
	"github.com/gobrave/kubectl-gobrave/internal/memprobe"
)

func main() {
	envFile := flag.String("env", "", "the environment file `hack/bench -hold` writes (KUBECONFIG, HOME, ..., TEMPLATE_DB)")
	n := flag.Int("n", 0, "events the monitor prints for the initial state (the load's N)")
	plugins := flag.String("plugin", "bin/kubectl-gobrave", "plugin binaries, space-separated, run interleaved; PATH@K=V;K=V adds environment (values may hold commas: GODEBUG=gctrace=1,memprofilerate=65536)")
	reps := flag.Int("reps", 1, "rounds (each runs every plugin once)")
	settle := flag.Duration("settle", 10*time.Second, "how long the monitor runs on after the n-th event")
	sample := flag.Duration("sample", 20*time.Millisecond, "how often /proc/PID/status is read")
	out := flag.String("out", "", "folder for each run's stderr, timeline and smaps (none if empty)")
	flag.Parse()
	if *envFile == "" || *n <= 0 {
		fmt.Fprintln(os.Stderr, "monreal: -env and -n are required")
		os.Exit(2)
	}
	if err := run(*envFile, *n, strings.Fields(*plugins), *reps, *settle, *sample, *out); err != nil {
		fmt.Fprintln(os.Stderr, "monreal:", err)
		os.Exit(1)
	}
}

// phase peaks, in KiB.
type peak struct{ rss, anon, file int64 }

func (p *peak) add(s map[string]int64) {
	if s["VmRSS"] > p.rss {
		p.rss, p.anon, p.file = s["VmRSS"], s["RssAnon"], s["RssFile"]
	}
}

// result is one run.
type result struct {
	plugin    string
	hwm       int64   // KiB, whole life (last sample)
	phases    [3]peak // listing, snapshot pass, after
	synced    time.Duration
	recorded  time.Duration // to the n-th event
	cpu, wall time.Duration
	events    int
}

var phaseNames = [3]string{"list/sync", "snapshot pass", "steady+exit"}

func run(envFile string, n int, plugins []string, reps int, settle, sample time.Duration, outDir string) error {
	env, template, err := holdenv.Read(envFile)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "monreal")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if outDir != "" {
		if err := os.MkdirAll(outDir, 0o755); err != nil {
			return err
		}
	}
	by := map[string][]result{}
	for r := range reps {
		order := slices.Clone(plugins)
		for range r % len(order) { // rotate: each binary runs first in turn
			order = append(order[1:], order[0])
		}
		for i, p := range order {
			db := filepath.Join(dir, "state.db")
			for _, suffix := range []string{"", "-wal", "-shm"} {
				_ = os.Remove(db + suffix)
			}
			if err := memprobe.CopyFile(template, db); err != nil {
				return err
			}
			prefix := ""
			if outDir != "" {
				prefix = filepath.Join(outDir, fmt.Sprintf("r%d-%d-%s", r, slices.Index(plugins, p), filepath.Base(strings.SplitN(p, "@", 2)[0])))
			}
			load := memprobe.Loadavg()
			res, err := runOne(p, db, env, n, settle, sample, prefix)
			if err != nil {
				return err
			}
			by[p] = append(by[p], res)
			fmt.Printf("round %d #%d %s (load %s): peak %.1f MiB", r, i, p, load, mib(res.hwm))
			for k, ph := range res.phases {
				fmt.Printf("; %s %.1f (anon %.1f, file %.1f)", phaseNames[k], mib(ph.rss), mib(ph.anon), mib(ph.file))
			}
			fmt.Printf("; synced %.1f s, %d events at %.1f s; CPU %.2f s, wall %.1f s\n",
				res.synced.Seconds(), res.events, res.recorded.Seconds(), res.cpu.Seconds(), res.wall.Seconds())
		}
	}
	for _, p := range plugins {
		rs := by[p]
		med := func(f func(result) float64) float64 {
			v := make([]float64, len(rs))
			for i, r := range rs {
				v[i] = f(r)
			}
			slices.Sort(v)
			return v[len(v)/2]
		}
		fmt.Printf("median of %d, %s: peak %.1f MiB; list/sync %.1f, snapshot %.1f, after %.1f MiB (anon %.1f / %.1f / %.1f); recorded at %.1f s; CPU %.2f s\n",
			len(rs), p, med(func(r result) float64 { return mib(r.hwm) }),
			med(func(r result) float64 { return mib(r.phases[0].rss) }), med(func(r result) float64 { return mib(r.phases[1].rss) }), med(func(r result) float64 { return mib(r.phases[2].rss) }),
			med(func(r result) float64 { return mib(r.phases[0].anon) }), med(func(r result) float64 { return mib(r.phases[1].anon) }), med(func(r result) float64 { return mib(r.phases[2].anon) }),
			med(func(r result) float64 { return r.recorded.Seconds() }), med(func(r result) float64 { return r.cpu.Seconds() }))
	}
	return nil
}

// runOne runs one monitor until it has printed n events, then for settle,
// then stops it (SIGTERM) and waits for its exit, sampling its memory.
func runOne(plugin, db string, env []string, n int, settle, sample time.Duration, prefix string) (result, error) {
	res := result{plugin: plugin}
	path, extra, _ := strings.Cut(plugin, "@")
	c := exec.Command(path, "monitor", "--all", "--follow", "-o", "json", "--state-db", db, "-v=4")
	c.Env = append(os.Environ(), env...)
	if extra != "" {
		c.Env = append(c.Env, strings.Split(extra, ";")...)
	}
	stdout, err := c.StdoutPipe()
	if err != nil {
		return res, err
	}
	stderr, err := c.StderrPipe()
	if err != nil {
		return res, err
	}
	var errLog io.Writer = io.Discard
	if prefix != "" {
		f, err := os.Create(prefix + ".stderr")
		if err != nil {
			return res, err
		}
		defer f.Close()
		errLog = f
	}
	var timeline *os.File
	if prefix != "" {
		if timeline, err = os.Create(prefix + ".timeline"); err != nil {
			return res, err
		}
		defer timeline.Close()
		fmt.Fprintln(timeline, "s\tevents\tphase\tVmRSS\tRssAnon\tRssFile\tVmHWM (KiB)")
	}
	start := time.Now()
	if err := c.Start(); err != nil {
		return res, err
	}
	var mu sync.Mutex
	events, syncs := 0, 0
	var syncedAt, recordedAt time.Time
	recorded := make(chan struct{})
	var readers sync.WaitGroup
	readers.Go(func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var e struct{ Type string }
			if json.Unmarshal(sc.Bytes(), &e) != nil || e.Type == "" {
				continue
			}
			mu.Lock()
			if events++; events == n {
				recordedAt = time.Now()
				close(recorded)
			}
			mu.Unlock()
		}
	})
	readers.Go(func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(errLog, line)
			if strings.Contains(line, `"monitor: informer synced"`) {
				mu.Lock()
				if syncs++; syncs == 2 { // the deployments' and the jobs'
					syncedAt = time.Now()
				}
				mu.Unlock()
			}
		}
	})
	done := make(chan error, 1)
	go func() {
		readers.Wait()
		done <- c.Wait()
	}()
	status := fmt.Sprintf("/proc/%d/status", c.Process.Pid)
	smaps := fmt.Sprintf("/proc/%d/smaps", c.Process.Pid)
	tick := time.NewTicker(sample)
	defer tick.Stop()
	var stopAt <-chan time.Time
	var lastLine time.Time
	var savedAnon int64
	stopped := false
	for {
		select {
		case err := <-done:
			res.wall = time.Since(start)
			if err != nil && !stopped {
				return res, fmt.Errorf("%s exited: %v", plugin, err)
			}
			res.cpu = c.ProcessState.UserTime() + c.ProcessState.SystemTime()
			mu.Lock()
			res.events = events
			if !syncedAt.IsZero() {
				res.synced = syncedAt.Sub(start)
			}
			if !recordedAt.IsZero() {
				res.recorded = recordedAt.Sub(start)
			}
			mu.Unlock()
			return res, nil
		case <-recorded:
			recorded = nil
			stopAt = time.After(settle)
		case <-stopAt:
			stopAt = nil
			stopped = true
			_ = c.Process.Signal(syscall.SIGTERM)
		case <-tick.C:
			s := memprobe.StatusFile(status)
			if s == nil {
				continue
			}
			mu.Lock()
			ph := 0
			switch {
			case !recordedAt.IsZero():
				ph = 2
			case !syncedAt.IsZero():
				ph = 1
			}
			ev := events
			mu.Unlock()
			res.hwm = max(res.hwm, s["VmHWM"])
			res.phases[ph].add(s)
			if prefix != "" && s["RssAnon"] >= savedAnon+1024 {
				savedAnon = s["RssAnon"]
				if b, err := os.ReadFile(smaps); err == nil {
					_ = os.WriteFile(prefix+".smaps", b, 0o644)
				}
			}
			if timeline != nil && time.Since(lastLine) >= time.Second {
				lastLine = time.Now()
				fmt.Fprintf(timeline, "%.1f\t%d\t%d\t%d\t%d\t%d\t%d\n", time.Since(start).Seconds(), ev, ph,
					s["VmRSS"], s["RssAnon"], s["RssFile"], s["VmHWM"])
			}
		}
	}
}

func mib(kib int64) float64 { return float64(kib) / 1024 }
