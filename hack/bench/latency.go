package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// dist is a latency distribution.
type dist struct {
	n                    int
	mind, p50, p99, maxd time.Duration
	neg                  int // samples below 0: the later clock saw it first
}

func distOf(ds []time.Duration) dist {
	if len(ds) == 0 {
		return dist{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	q := func(p float64) time.Duration {
		i := int(p*float64(len(s))+0.5) - 1 // nearest rank
		return s[min(max(i, 0), len(s)-1)]
	}
	neg, _ := slices.BinarySearch(s, 0)
	return dist{n: len(s), mind: s[0], p50: q(0.50), p99: q(0.99), maxd: s[len(s)-1], neg: neg}
}

// latencyResult is the event-to-database phase.
type latencyResult struct {
	jobs          int
	release       time.Duration // first to last pod patched
	completions   time.Duration // first to last Complete seen by the benchmark's watch
	rowFromCond   dist          // events.time − condition lastTransitionTime
	rowFromWatch  dist          // events.time − first seen by the benchmark's watch
	lineFromCond  dist          // monitor's stdout line (after the commit) − lastTransitionTime
	lineFromWatch dist          // monitor's stdout line − first seen by the watch
	condToWatch   dist          // watch − lastTransitionTime: the bias of the second-resolution time
	// The watch inside the driver (the clock of reports before latwatch) against latwatch's.
	lineFromWatchIn dist // monitor's line − first seen by the driver's in-process watch
	watchToWatchIn  dist // driver's in-process watch − latwatch: how late the driver's watch is
	lineFromFirst   dist // monitor's line − the earliest any watcher saw Complete (never below 0)
	trace           writerTrace
	baseline        *baselineResult // -latency-baseline: the other binary, side by side
	monitor         measured
	monitorLast     time.Duration // last completion seen → monitor printed the last exit
	initial         time.Duration // monitor start → its line of the (N+L)th change (approximate: from the driver's clock)
	kwait           *measured
	kwaitLast       time.Duration // last completion seen → kubectl wait returned
	missing         int
}

type seenJob struct {
	cond, watch time.Time
}

// Environment of the latency phase for an A/B by hand (the report shows the last run of -plugin;
// each run logs a summary line "latency run"):
//   - latencyRepsEnv: the phase runs this many times (default 1), each with 1,000 new held jobs
//     (the last run's are deleted first) and a fresh copy of the database;
//   - latencyAltEnv: comma-separated other plugin binaries; each run of -plugin is followed by
//     one run of each of them, alone (not side by side as -latency-baseline): A, B, A, B, ...
const (
	latencyRepsEnv = "GOBRAVE_BENCH_LATENCY_REPS"
	latencyAltEnv  = "GOBRAVE_BENCH_LATENCY_ALT"
)

// measureLatency runs the latency phase (measureLatencyOnce) as latencyRepsEnv and latencyAltEnv
// ask; the result is the last run of -plugin.
func (s *scale) measureLatency(ctx context.Context) (*latencyResult, error) {
	reps := 1
	if v := os.Getenv(latencyRepsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%s=%q: want a positive number", latencyRepsEnv, v)
		}
		reps = n
	}
	plugins := []string{s.o.plugin}
	if v := os.Getenv(latencyAltEnv); v != "" {
		for _, p := range strings.Split(v, ",") {
			p, err := filepath.Abs(p)
			if err != nil {
				return nil, err
			}
			if _, err := os.Stat(p); err != nil {
				return nil, err
			}
			plugins = append(plugins, p)
		}
	}
	var res *latencyResult
	run := 0
	for r := range reps {
		for _, p := range plugins {
			if run > 0 {
				if err := s.deleteLatencyJobs(ctx); err != nil {
					return res, err
				}
			}
			run++
			lr, err := s.measureLatencyOnce(ctx, p, fmt.Sprintf("run-%d", run))
			if lr != nil {
				t := lr.trace
				logf("N=%d latency run %d (rep %d) %s: latwatch→line p50 %s p99 %s max %s; latwatch→row p50 %s p99 %s max %s; writer wait p99 %s max %s, commit p99 %s max %s, %d batches; monitor CPU %.1f s; load %.1f",
					s.n, run, r+1, filepath.Base(p), ms3(lr.lineFromWatch.p50), ms3(lr.lineFromWatch.p99), ms3(lr.lineFromWatch.maxd),
					ms3(lr.rowFromWatch.p50), ms3(lr.rowFromWatch.p99), ms3(lr.rowFromWatch.maxd),
					ms3(t.waited.p99), ms3(t.waited.maxd), ms3(t.commit.p99), ms3(t.commit.maxd), t.batches, lr.monitor.CPU.Seconds(), lr.monitor.Load)
			}
			if err != nil {
				return lr, err
			}
			if p == s.o.plugin {
				res = lr
			}
		}
	}
	return res, nil
}

// deleteLatencyJobs removes the held jobs of the last latency run and waits until their pods are
// gone, so that the next run creates them again under the same names.
func (s *scale) deleteLatencyJobs(ctx context.Context) error {
	c := s.cl.client
	ns := s.load.namespaces()[0]
	// One DELETE a job: a DeleteCollection of the 1,000 jobs outlived the API server's request
	// timeout on a loaded machine (stream error, INTERNAL_ERROR).
	jobs, err := c.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: labelLatency})
	if err != nil {
		return err
	}
	bg := metav1.DeletePropagationBackground
	if err := parallel(ctx, len(jobs.Items), func(i int) error {
		err := c.BatchV1().Jobs(ns).Delete(ctx, jobs.Items[i].Name, metav1.DeleteOptions{PropagationPolicy: &bg})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}); err != nil {
		return fmt.Errorf("delete the latency jobs: %w", err)
	}
	deadline := time.Now().Add(10 * time.Minute)
	for {
		jobs, err := c.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: labelLatency})
		if err != nil {
			return err
		}
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labelLatency})
		if err != nil {
			return err
		}
		if len(jobs.Items) == 0 && len(pods.Items) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("latency jobs not gone after 10 minutes: %d jobs, %d pods", len(jobs.Items), len(pods.Items))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// measureLatencyOnce releases o.latencyJobs held jobs within about 5 s while `monitor --all` of
// plugin runs, and `kubectl wait --for=condition=complete` side by side.
func (s *scale) measureLatencyOnce(ctx context.Context, plugin, runName string) (*latencyResult, error) {
	L := s.o.latencyJobs
	c := s.cl.client
	res := &latencyResult{jobs: L}
	ns := s.load.namespaces()[0] // the latency jobs join the load's first namespace
	logf("N=%d latency: creating %d held jobs in namespace %s", s.n, L, ns)
	made, err := createGobrave(ctx, c, latencySpecs(L, ns))
	if err != nil {
		return res, err
	}
	if err := waitRunning(ctx, c, ns, labelLatency, 0, L, 20*time.Minute); err != nil {
		return res, err
	}
	db, err := s.dbCopy()
	if err != nil {
		return res, err
	}
	if err := record(ctx, db, made); err != nil {
		return res, err
	}
	ids := map[string]string{} // job name → runtime ID
	for _, m := range made {
		id, err := runtimeid.New(runtimeid.RuntimeK8s, ns, m.s.Kind(), m.s.Name)
		if err != nil {
			return res, err
		}
		ids[m.s.Name] = id.String()
	}

	// The benchmark's clock: a watch of the latency jobs only (their namespace and label), in a
	// process of its own (latwatch); and, for comparison with earlier reports, the same watch
	// inside this driver.
	var mu sync.Mutex
	seen, seenIn := map[string]seenJob{}, map[string]seenJob{}
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	stopWatch, err := s.startLatwatch(wctx, ns, &mu, seen)
	if err != nil {
		return res, err
	}
	defer stopWatch()
	wc, err := s.watchClient()
	if err != nil {
		return res, err
	}
	f := informers.NewSharedInformerFactoryWithOptions(wc, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = labelLatency }))
	ji := f.Batch().V1().Jobs().Informer()
	onJob := func(obj any) {
		now := time.Now()
		j, ok := obj.(*batchv1.Job)
		if !ok {
			return
		}
		for _, cnd := range j.Status.Conditions {
			if cnd.Type == batchv1.JobComplete && cnd.Status == corev1.ConditionTrue {
				mu.Lock()
				if _, ok := seenIn[j.Name]; !ok {
					seenIn[j.Name] = seenJob{cond: cnd.LastTransitionTime.Time, watch: now}
				}
				mu.Unlock()
			}
		}
	}
	if _, err := ji.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onJob, UpdateFunc: func(_, o any) { onJob(o) },
	}); err != nil {
		return res, err
	}
	f.Start(wctx.Done())
	if !cache.WaitForCacheSync(wctx.Done(), ji.HasSynced) {
		return res, fmt.Errorf("the benchmark's job watch did not sync")
	}

	// monitor --all --follow: every record (N + L) first changes once (the running slice and the
	// latency jobs start, the deployments at 0 exit, the suspended jobs pause), then the L jobs exit.
	// With -latency-baseline a second monitor (another binary, its own copy of the database) runs
	// side by side and sees the same release.
	latID := map[string]bool{}
	for _, id := range ids {
		latID[id] = true
	}
	mctx, mcancel := context.WithCancel(ctx)
	want := s.n + L
	mons := []*latMonitor{{plugin: plugin, db: db, ua: pluginUA}}
	if s.o.latencyBaseline != "" {
		db2, err := s.dbCopy()
		if err != nil {
			mcancel()
			return res, err
		}
		if err := record(ctx, db2, made); err != nil {
			mcancel()
			return res, err
		}
		mons = append(mons, &latMonitor{plugin: s.o.latencyBaseline, db: db2})
	}
	var kwWG sync.WaitGroup
	defer func() {
		mcancel()
		for _, m := range mons {
			m.wg.Wait()
		}
		kwWG.Wait()
	}()
	monStart := time.Now()
	for _, m := range mons {
		m.start(mctx, s, want, L, latID)
	}
	for _, m := range mons {
		select {
		case <-m.allRecorded:
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(40 * time.Minute):
			return res, fmt.Errorf("monitor --all (%s) did not record %d changes in 40 minutes (%d)", m.plugin, want, m.initialCount())
		}
	}
	res.initial = mons[0].recordedAt.Sub(monStart)
	logf("N=%d latency: monitor --all has recorded every change; releasing %d jobs over 5 s, kubectl wait alongside", s.n, L)

	// kubectl wait --for=condition=complete on the same jobs, side by side.
	var kwErr error
	var kw measured
	kwWG.Go(func() {
		kw, kwErr = s.cl.run(mctx, procSpec{argv: []string{s.cl.kubectl(), "wait", "--for=condition=complete", "job",
			"-n", ns, "-l", labelLatency, "--timeout=30m"}, env: s.cl.env, ua: kubectlUA, timeout: 40 * time.Minute})
	})

	// Release: remove the hold label from each pod, paced over 5 s. kwok then completes the pod at
	// once, the job controller sets Complete.
	pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labelLatency})
	if err != nil {
		return res, err
	}
	if len(pods.Items) != L {
		return res, fmt.Errorf("%d pods of latency jobs, want %d", len(pods.Items), L)
	}
	patch := []byte(`{"metadata":{"labels":{"` + labelHold + `":null}}}`)
	relStart := time.Now()
	every := 5 * time.Second / time.Duration(L)
	err = parallelN(ctx, L, 128, func(i int) error {
		if d := time.Until(relStart.Add(time.Duration(i) * every)); d > 0 {
			time.Sleep(d)
		}
		_, err := c.CoreV1().Pods(ns).Patch(ctx, pods.Items[i].Name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	res.release = time.Since(relStart)
	if err != nil {
		return res, fmt.Errorf("release: %w", err)
	}
	for _, m := range mons {
		m.wg.Wait()
		if m.err != nil {
			return res, m.err
		}
	}
	res.monitor = mons[0].m
	res.trace = traceOf(mons[0].m.Stderr, relStart)
	logf("N=%d latency: monitor recorded %d exits; waiting for kubectl wait", s.n, L)
	kwWG.Wait()
	if kwErr != nil {
		return res, kwErr
	}
	res.kwait = &kw
	time.Sleep(500 * time.Millisecond)
	stopWatch()
	wcancel()

	// The events rows.
	st, err := store.Open(ctx, db)
	if err != nil {
		return res, err
	}
	var idList []string
	for _, id := range ids {
		idList = append(idList, id)
	}
	evs, err := st.Events(ctx, idList...)
	st.Close()
	if err != nil {
		return res, err
	}
	row := map[string]time.Time{}
	for _, e := range evs {
		if e.Type == store.ContainerExited {
			row[e.RuntimeID] = e.Time
		}
	}
	baseRow := map[string]time.Time{}
	if len(mons) > 1 {
		if baseRow, err = exitRows(ctx, mons[1].db, idList); err != nil {
			return res, err
		}
	}
	mu.Lock()
	defer mu.Unlock()
	var rc, rw, lc, lw, cw, lwIn, cwIn, bw, le, be []time.Duration
	var firstSeen, lastSeen time.Time
	for name, id := range ids {
		sj, ok := seen[name]
		rt, ok2 := row[id]
		pt, ok3 := mons[0].printed[id]
		if !ok || !ok2 || !ok3 {
			res.missing++
			continue
		}
		rc = append(rc, rt.Sub(sj.cond))
		rw = append(rw, rt.Sub(sj.watch))
		lc = append(lc, pt.Sub(sj.cond))
		lw = append(lw, pt.Sub(sj.watch))
		cw = append(cw, sj.watch.Sub(sj.cond))
		// The earliest any watcher saw it: latwatch, the driver's watch, the monitor's handler
		// (the events row's time), the baseline's handler. Never later than the event reached a
		// watcher, so a delay from it is never below 0 and never flattering.
		first := minTime(sj.watch, rt)
		if si, ok := seenIn[name]; ok {
			lwIn = append(lwIn, pt.Sub(si.watch))
			cwIn = append(cwIn, si.watch.Sub(sj.watch))
			first = minTime(first, si.watch)
		}
		if len(mons) > 1 {
			if bt, ok := mons[1].printed[id]; ok {
				bw = append(bw, bt.Sub(sj.watch))
				if brt, ok := baseRow[id]; ok {
					first = minTime(first, brt)
					be = append(be, bt.Sub(first))
				}
			}
		}
		le = append(le, pt.Sub(first))
		if firstSeen.IsZero() || sj.watch.Before(firstSeen) {
			firstSeen = sj.watch
		}
		if sj.watch.After(lastSeen) {
			lastSeen = sj.watch
		}
	}
	res.rowFromCond, res.rowFromWatch = distOf(rc), distOf(rw)
	res.lineFromCond, res.lineFromWatch = distOf(lc), distOf(lw)
	res.condToWatch = distOf(cw)
	res.lineFromWatchIn, res.watchToWatchIn = distOf(lwIn), distOf(cwIn)
	res.lineFromFirst = distOf(le)
	if len(mons) > 1 {
		res.baseline = &baselineResult{plugin: mons[1].plugin, monitor: mons[1].m, lineFromWatch: distOf(bw), lineFromFirst: distOf(be), trace: traceOf(mons[1].m.Stderr, relStart)}
	}
	res.completions = lastSeen.Sub(firstSeen)
	if dir := os.Getenv(latencyDumpEnv); dir != "" {
		if err := dumpLatency(filepath.Join(dir, runName), ids, seen, seenIn, row, mons); err != nil {
			logf("N=%d latency: %s: %v", s.n, latencyDumpEnv, err)
		}
	}
	var lastPrinted time.Time
	for _, t := range mons[0].printed {
		if t.After(lastPrinted) {
			lastPrinted = t
		}
	}
	res.monitorLast = lastPrinted.Sub(lastSeen)
	res.kwaitLast = kw.Started.Add(kw.Wall).Sub(lastSeen)
	if res.missing > 0 {
		return res, fmt.Errorf("%d of %d latency jobs lack a completion, an events row or a printed line", res.missing, L)
	}
	return res, nil
}

// watchClient is a client for the benchmark's own watch, with its own User-Agent.
func (s *scale) watchClient() (kubernetes.Interface, error) {
	return newClient(s.cl.kubeconfig, "gobrave-bench/1 (watch)")
}

// latMonitor is one `monitor --all --follow` of the latency phase.
type latMonitor struct {
	plugin, db, ua string

	wg          sync.WaitGroup
	allRecorded chan struct{}
	mu          sync.Mutex
	initial     int
	recordedAt  time.Time
	printed     map[string]time.Time // runtime ID → its exit line read
	m           measured
	err         error
}

// start runs the monitor until it has printed the exits of the L latency IDs, after the want
// changes of the initial sync; allRecorded is closed after those.
func (lm *latMonitor) start(ctx context.Context, s *scale, want, L int, latID map[string]bool) {
	lm.allRecorded = make(chan struct{})
	lm.printed = map[string]time.Time{}
	exited := 0
	lm.wg.Go(func() {
		lm.m, lm.err = s.cl.run(ctx, procSpec{
			// -v=4: the writer's trace of each batch (pkg/monitor/writer.go), read by traceOf.
			argv: []string{lm.plugin, "monitor", "--all", "--follow", "-o", "json", "--state-db", lm.db, "-v=4"},
			env:  monitorEnv(s.cl.env),
			ua:   lm.ua,
			until: func(line string, at time.Time) bool {
				var e struct{ RuntimeID, Type string }
				if json.Unmarshal([]byte(line), &e) != nil || e.Type == "" {
					return false
				}
				lm.mu.Lock()
				defer lm.mu.Unlock()
				if lm.initial < want {
					if lm.initial++; lm.initial == want {
						lm.recordedAt = at
						close(lm.allRecorded)
					}
					return false
				}
				if e.Type == string(store.ContainerExited) && latID[e.RuntimeID] {
					lm.printed[e.RuntimeID] = at
					exited++
				}
				return exited == L
			},
			timeout: 60 * time.Minute,
		})
	})
}

func (lm *latMonitor) initialCount() int {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	return lm.initial
}

// baselineResult is the second monitor of -latency-baseline.
type baselineResult struct {
	plugin        string
	monitor       measured
	lineFromWatch dist
	lineFromFirst dist
	trace         writerTrace
}

// writerTrace summarizes the writer's trace lines (klog -v=4, pkg/monitor/writer.go) logged
// after the release began.
type writerTrace struct {
	batches                 int
	waited, commit, onEvent dist // per batch: oldest observation's wait for the writer, the commit, OnEvent
	polls                   dist // history polls of 1 ms or more
}

// traceOf reads the writer's trace lines of stderr logged at or after from. klog's header has
// the local time to the microsecond, without the year.
func traceOf(stderr string, from time.Time) writerTrace {
	var t writerTrace
	var waited, commit, onEvent, polls []time.Duration
	for _, line := range strings.Split(stderr, "\n") {
		at, ok := klogTime(line, from)
		if !ok || at.Before(from) {
			continue
		}
		switch {
		case strings.Contains(line, `"monitor: batch recorded"`):
			t.batches++
			waited = append(waited, traceMs(line, "waitedMs"))
			commit = append(commit, traceMs(line, "commitMs"))
			onEvent = append(onEvent, traceMs(line, "onEventMs"))
		case strings.Contains(line, `"monitor: history polled"`):
			polls = append(polls, traceMs(line, "ms"))
		}
	}
	t.waited, t.commit, t.onEvent, t.polls = distOf(waited), distOf(commit), distOf(onEvent), distOf(polls)
	return t
}

// klogTime is the time in a klog header ("I1201 16:37:00.123456 ..."), in the year of ref.
func klogTime(line string, ref time.Time) (time.Time, bool) {
	if len(line) < 21 || !strings.ContainsRune("IWEF", rune(line[0])) {
		return time.Time{}, false
	}
	t, err := time.ParseInLocation("0102 15:04:05.000000", line[1:21], time.Local)
	if err != nil {
		return time.Time{}, false
	}
	return t.AddDate(ref.Year(), 0, 0), true
}

// traceMs is the value of key=<milliseconds> in a klog structured line.
func traceMs(line, key string) time.Duration {
	i := strings.Index(line, " "+key+"=")
	if i < 0 {
		return 0
	}
	v := line[i+len(key)+2:]
	if j := strings.IndexByte(v, ' '); j >= 0 {
		v = v[:j]
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return 0
	}
	return time.Duration(f * float64(time.Millisecond))
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// exitRows reads the time of the ContainerExited events of ids in the database db.
func exitRows(ctx context.Context, db string, ids []string) (map[string]time.Time, error) {
	st, err := store.Open(ctx, db)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	evs, err := st.Events(ctx, ids...)
	if err != nil {
		return nil, err
	}
	rows := map[string]time.Time{}
	for _, e := range evs {
		if e.Type == store.ContainerExited {
			rows[e.RuntimeID] = e.Time
		}
	}
	return rows, nil
}

// writeLatencyExtra reports the two clocks side by side, the baseline monitor and the writer's
// trace, after the latency table.
func writeLatencyExtra(w func(string, ...any), l *latencyResult) {
	w("The benchmark's watch above is latwatch: a process of its own watching only the held jobs (their namespace and label). For comparison, the same watch inside the driver (the clock of reports before 2026-12-01 evening), on the same events:\n\n")
	w("| from → to | n | min | p50 | p99 | max | below 0 |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	row := func(label string, d dist) {
		w("| %s | %d | %s | %s | %s | %s | %d |\n", label, d.n, ms3(d.mind), ms3(d.p50), ms3(d.p99), ms3(d.maxd), d.neg)
	}
	row("**the earliest of latwatch, the driver's watch and the monitors' handlers sees Complete → monitor prints the event** (never below 0)", l.lineFromFirst)
	row("driver's in-process watch first sees Complete → monitor prints the event", l.lineFromWatchIn)
	row("latwatch sees Complete → the driver's in-process watch sees it", l.watchToWatchIn)
	if b := l.baseline; b != nil {
		row(fmt.Sprintf("baseline `%s`, side by side: latwatch → its line", b.plugin), b.lineFromWatch)
		row("baseline, side by side: the earliest watcher → its line", b.lineFromFirst)
	}
	w("\n")
	tr := func(who string, t writerTrace) {
		if t.batches == 0 {
			w("- %s: no writer trace after the release began (a binary without it).\n", who)
			return
		}
		w("- %s, writer trace (-v=4) from the release on: %d batches; oldest observation's wait for the writer p50 %s p99 %s max %s; commit p50 %s p99 %s max %s; OnEvent (the lines) p99 %s max %s; %d history polls of 1 ms or more (max %s).\n",
			who, t.batches, ms3(t.waited.p50), ms3(t.waited.p99), ms3(t.waited.maxd), ms3(t.commit.p50), ms3(t.commit.p99), ms3(t.commit.maxd),
			ms3(t.onEvent.p99), ms3(t.onEvent.maxd), t.polls.n, ms3(t.polls.maxd))
	}
	tr("`monitor --all --follow` (-plugin)", l.trace)
	if b := l.baseline; b != nil {
		tr("baseline", b.trace)
		w("- baseline `monitor --all --follow`: peak RSS %s MiB, CPU %.1f s (the request counts of -plugin's monitor include the baseline's: same User-Agent).\n", mib(b.monitor.MaxRSS), b.monitor.CPU.Seconds())
	}
	w("\n")
}

// latencyDumpEnv names a folder: when set, the latency phase runs the monitors with
// GODEBUG=gctrace=1 and writes there, for a search of the tail by hand, each job's times
// (latency.tsv: latwatch, the driver's watch, the events row, each monitor's line, Unix
// microseconds) and each monitor's stderr (its -v=4 trace and gctrace, stderr-N.log, with its
// start time on the first line).
const latencyDumpEnv = "GOBRAVE_BENCH_LATENCY_DUMP"

func monitorEnv(env []string) []string {
	if os.Getenv(latencyDumpEnv) == "" {
		return env
	}
	return append(slices.Clone(env), "GODEBUG=gctrace=1")
}

func dumpLatency(dir string, ids map[string]string, seen, seenIn map[string]seenJob, row map[string]time.Time, mons []*latMonitor) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	us := func(t time.Time) int64 {
		if t.IsZero() {
			return 0
		}
		return t.UnixMicro()
	}
	var b strings.Builder
	b.WriteString("job\tlatwatch\tdriver\trow\tcond\tline0\tline1\n")
	for name, id := range ids {
		var l1 time.Time
		if len(mons) > 1 {
			l1 = mons[1].printed[id]
		}
		fmt.Fprintf(&b, "%s\t%d\t%d\t%d\t%d\t%d\t%d\n", name, us(seen[name].watch), us(seenIn[name].watch), us(row[id]),
			us(seen[name].cond), us(mons[0].printed[id]), us(l1))
	}
	if err := os.WriteFile(filepath.Join(dir, "latency.tsv"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	for i, m := range mons {
		head := fmt.Sprintf("# %s started %d (Unix microseconds)\n", m.plugin, us(m.m.Started))
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("stderr-%d.log", i)), []byte(head+m.m.Stderr), 0o644); err != nil {
			return err
		}
	}
	return nil
}
