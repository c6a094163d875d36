package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gobrave/kubectl-gobrave/internal/holdenv"
	"github.com/gobrave/kubectl-gobrave/pkg/monitor"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

const pluginUA = "kubectl-gobrave/"
const limitUA = "gobrave-bench-limit/"

// limitResult is what hack/bench/limit prints.
type limitResult struct {
	Mode    string         `json:"mode"`
	Objects map[string]int `json:"objects"`
	Ms      float64        `json:"ms"`
}

const kubectlUA = "kubectl/"

// row is one measured command in the report.
type row struct {
	key      string // recover, limit, get, ps, psfirst, monitor
	what     string
	wall     time.Duration
	spread   string
	rss      int64 // KiB: the median over the runs
	rssRange string
	cpu      time.Duration
	requests int
	perObj   int
	load     float64
	note     string // what the requests were, checks
}

// scaleResult is everything measured at one N.
type scaleResult struct {
	n, running, nodes int
	setup             []string
	created           time.Duration // the N objects created with client-go
	settled           time.Duration // creation start to the controllers caught up
	held              string        // what the cluster held
	dbBytes           int64         // the database after a recover (N records, their histories)
	events            int
	rows              []row
	latency           *latencyResult
	notes             []string
	total             time.Duration // this N, cluster up to down
}

func (s *scaleResult) find(key string) *row {
	for i := range s.rows {
		if s.rows[i].key == key {
			return &s.rows[i]
		}
	}
	return nil
}

// scale is the state of one N's run.
type scale struct {
	o        options
	n        int
	load     loadShape
	cl       *cluster
	template string // the database with the N gobrave records (see recordLoad)
	synced   string // the database a first recover left: in sync with the cluster
	res      *scaleResult
	runs     int
	// interleavedLimit are the limit's runs made between the recovers (-baseline).
	interleavedLimit []measured
}

func (s *scale) dbCopy() (string, error) {
	s.runs++
	return copyDB(s.template, filepath.Join(s.cl.tmp, fmt.Sprintf("db-%03d", s.runs)))
}

func runScale(ctx context.Context, o options, n int) (*scaleResult, error) {
	t00 := time.Now()
	running, err := runningOf(o.running, n)
	if err != nil {
		return nil, err
	}
	l := loadShape{n: n, running: running, nss: o.nss}
	lat := o.latencyJobs
	if o.skip["latency"] {
		lat = 0
	}
	res := &scaleResult{n: n, running: l.running, nodes: (l.running+lat)/100 + 2}
	defer func() { res.total = time.Since(t00) }()
	s := &scale{o: o, n: n, load: l, res: res}
	logf("N=%d: starting a cluster with %d nodes", n, res.nodes)
	t0 := time.Now()
	cl, err := startCluster(ctx, o.root, res.nodes, o.syncs)
	defer cl.down()
	if err != nil {
		return res, err
	}
	s.cl = cl
	cl.serverGC = o.serverGC
	res.setup = append(res.setup, fmt.Sprintf("cluster with %d nodes up in %s (controller manager: %d concurrent deployment, replica set and job syncs)", res.nodes, secs(time.Since(t0)), o.syncs))
	c := cl.client
	nss := l.namespaces()
	for _, ns := range nss {
		if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return res, err
		}
	}
	for _, ns := range nss {
		for { // pods need the default ServiceAccount
			if _, err := c.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return res, ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	// A user's kubectl has a warm discovery cache: warm the one every kubectl here shares.
	if _, err := cl.run(ctx, procSpec{argv: []string{cl.kubectl(), "api-resources"}, env: cl.env}); err != nil {
		return res, err
	}

	// The floor: what each binary's RSS is before it does anything.
	self, err := os.Executable()
	if err != nil {
		return res, err
	}
	floorP, err := cl.run(ctx, procSpec{argv: []string{o.plugin, "version", "--client"}, env: cl.env})
	if err != nil {
		return res, err
	}
	floorB, err := cl.run(ctx, procSpec{argv: []string{self, "idle"}, env: cl.env})
	if err != nil {
		return res, err
	}
	floorK, err := cl.run(ctx, procSpec{argv: []string{cl.kubectl(), "version", "--client"}, env: cl.env})
	if err != nil {
		return res, err
	}
	floorL, err := cl.run(ctx, procSpec{argv: []string{limitBin, "-mode", "idle"}, env: cl.env})
	if err != nil {
		return res, err
	}
	// The benchmark's own binary measures nothing it reports (every measured command runs through
	// hack/bench/launch, whose peak is a few MiB): its floor is here for its profile mode only.
	res.notes = append(res.notes, fmt.Sprintf("RSS floors (a process that does nothing, measured through hack/bench/launch as every command): the plugin (`version --client`) %s MiB, the limit program (`-mode idle`) %s MiB, kubectl (`version --client`) %s MiB; this benchmark's binary %s MiB (not in any figure above, and not a leak: mostly the pages of a 124 MiB executable with client-go, the plugin's packages, SQLite and gonum/plot, whose package init allocates about 2 MiB; only `bench profile` runs the plugin inside it)",
		mib(floorP.MaxRSS), mib(floorL.MaxRSS), mib(floorK.MaxRSS), mib(floorB.MaxRSS)))

	// The load.
	specs, runs := l.specs()
	logf("N=%d: creating %d gobrave workloads (%d with pods) with %d workers", n, n, l.running, o.workers)
	t0 = time.Now()
	made, err := createLoad(ctx, c, specs, runs, o.workers, o.pauseIdle)
	if err != nil {
		return res, fmt.Errorf("create the load: %w", err)
	}
	res.created = time.Since(t0)
	logf("N=%d: %d objects created in %s (%.0f/s); waiting for the controllers", n, n, secs(res.created), float64(n)/res.created.Seconds())
	// Said before the wait, so that a run stopped while the controllers catch up reports it too.
	res.held = fmt.Sprintf("%d deployments (%d at 1 replica, ready; %d scaled to 0) and %d jobs (%d running a held pod; %d suspended) labelled gobrave-workload, with the gobrave.dev/spec annotation, %s; the deployment controller adds one ReplicaSet per deployment (%d); %d pods",
		l.perKind(), l.runPerKind(), l.idlePerKind(), l.perKind(), l.runPerKind(), l.idlePerKind(), l.where(), l.perKind(), l.running)
	if o.pauseIdle {
		res.held = fmt.Sprintf("%d deployments (%d at 1 replica, ready; %d scaled to 0 and paused, without a progress deadline) and %d jobs (%d running a held pod; %d suspended) labelled gobrave-workload, with the gobrave.dev/spec annotation, %s; the deployment controller adds a ReplicaSet to each deployment not paused (%d); %d pods",
			l.perKind(), l.runPerKind(), l.idlePerKind(), l.perKind(), l.runPerKind(), l.idlePerKind(), l.where(), l.runPerKind(), l.running)
	}
	if lat > 0 {
		res.held += fmt.Sprintf("; for the monitor phase only (after recover, limit, get and ps), %d more jobs with a held pod each in namespace %s", lat, nss[0])
	}
	res.setup = append(res.setup,
		fmt.Sprintf("%d objects created with client-go (%d workers, QPS/burst 2000) in %s: %.0f objects/s", n, o.workers, secs(res.created), float64(n)/res.created.Seconds()))
	// The paused load settled 68 s after the last create at 100,000 on an idle machine
	// (docs/bench-2026-12-01-n100000.md), and had not after 15 minutes at load 10-20: wait as long
	// as the controllers make progress.
	st, err := waitSettled(ctx, c, l, settleStall, settleLimit(n))
	if err != nil {
		return res, err
	}
	res.settled = time.Since(t0)
	res.setup = append(res.setup,
		fmt.Sprintf("controllers caught up (%d running, %d scaled to 0 observed, %d suspended) %s after the first create", st.started, st.exited, st.paused, secs(res.settled)))

	t0 = time.Now()
	s.template = filepath.Join(cl.tmp, "template", "state.db")
	if err := os.MkdirAll(filepath.Dir(s.template), 0o700); err != nil {
		return res, err
	}
	if err := recordLoad(ctx, s.template, made, runs); err != nil {
		return res, fmt.Errorf("record: %w", err)
	}
	res.setup = append(res.setup, fmt.Sprintf("the plugin's %d records (store.Put, then ApplyBatch of %d starts) written in %s", n, n-l.running, secs(time.Since(t0))))

	if o.hold {
		if err := s.holdFor(ctx); err != nil {
			return res, err
		}
	}
	for _, p := range []struct {
		name string
		fn   func(context.Context) error
	}{
		{"recover", s.measureRecover},
		{"limit", s.measureLimit},
		{"get", s.measureGet},
		{"ps", s.measurePs},
	} {
		if o.skip[p.name] {
			continue
		}
		if err := p.fn(ctx); err != nil {
			return res, err
		}
	}
	if lat > 0 {
		lr, err := s.measureLatency(ctx)
		res.latency = lr
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// settleStall is how long runScale waits for the controllers after the last create while none of
// the counts of waitSettled moves.
const settleStall = 5 * time.Minute

// settleLimit is the longest runScale waits for the controllers after the last create, however they
// progress: 10 minutes plus 18 ms an object (40 minutes at 100,000).
func settleLimit(n int) time.Duration {
	return 10*time.Minute + time.Duration(n)*18*time.Millisecond
}

// medianRow turns repeated runs into a row: the median wall time (with its run's CPU, requests and
// load) and, separately, the median peak RSS, with the ranges.
func medianRow(key, what string, ms []measured) row {
	m := median(ms)
	rss := make([]int64, len(ms))
	for i, x := range ms {
		rss[i] = x.MaxRSS
	}
	slices.Sort(rss)
	r := row{key: key, what: what, wall: m.Wall, spread: spread(ms), rss: rss[len(rss)/2], cpu: m.CPU,
		requests: len(m.Requests), perObj: perObjectCount(m.Requests), load: m.Load, note: summarize(m.Requests)}
	if g := gcsOf(ms); g != "" {
		r.note = strings.TrimPrefix(r.note+"; the API server's GCs in each run (its wall time): "+g, "; ")
	}
	if len(rss) > 1 {
		r.rssRange = mib(rss[0]) + "–" + mib(rss[len(rss)-1])
	}
	return r
}

// measureRecover runs `recover --once` on fresh copies of the database; every record has changed.
// With -baseline, each run of the plugin goes with one of the baseline and one of the limit program
// (an A/B in one run: the same cluster, database and load for all three); the limit phase then
// reports those runs. The three take turns at going first (runOrder): whatever ran second in every
// repetition was 0.1 s slower at 10,000 (about 13 %), whichever binary it was.
func (s *scale) measureRecover(ctx context.Context) error {
	var runs, base, lim []measured
	for i := range s.o.reps {
		steps := map[string]func() error{
			"plugin": func() error {
				m, err := s.recoverOnce(ctx, s.o.plugin, fmt.Sprintf("recover --once (%d/%d)", i+1, s.o.reps), i == 0)
				runs = append(runs, m)
				return err
			},
			"baseline": func() error {
				m, err := s.recoverOnce(ctx, s.o.baseline, fmt.Sprintf("baseline recover --once (%d/%d)", i+1, s.o.reps), false)
				if err != nil {
					return fmt.Errorf("baseline: %w", err)
				}
				base = append(base, m)
				return nil
			},
			"limit": func() error {
				m, _, err := s.limitOnce(ctx, i)
				lim = append(lim, m)
				return err
			},
		}
		for _, step := range runOrder(i, s.o.baseline != "") {
			if err := steps[step](); err != nil {
				return err
			}
		}
	}
	s.res.rows = append(s.res.rows, medianRow("recover", "`kubectl gobrave recover --once`", runs))
	var synced []measured
	for i := range s.o.reps {
		m, err := s.recoverSynced(ctx, fmt.Sprintf("recover --once, nothing changed (%d/%d)", i+1, s.o.reps))
		if err != nil {
			return err
		}
		synced = append(synced, m)
	}
	s.res.rows = append(s.res.rows, medianRow("recover-synced", "`kubectl gobrave recover --once` on the database a first recover left (nothing changed)", synced))
	if s.o.baseline != "" {
		s.res.rows = append(s.res.rows, medianRow("recover-baseline", "`recover --once` of the baseline ("+filepath.Base(filepath.Dir(s.o.baseline))+"/"+filepath.Base(s.o.baseline)+"), interleaved with the runs above", base))
		s.interleavedLimit = lim
	}
	if s.o.profileDir != "" {
		return s.profile(ctx)
	}
	return nil
}

// runOrder is the order of the programs in repetition i: the plugin alone, or with a baseline the
// baseline, the plugin and the limit rotated by one each repetition, so that over three each has
// been first, second and third once.
func runOrder(i int, baseline bool) []string {
	if !baseline {
		return []string{"plugin"}
	}
	order := []string{"baseline", "plugin", "limit"}
	r := i % 3
	return append(order[r:], order[:r]...)
}

// recoverOnce runs one `recover --once` of plugin on a fresh copy of the database and checks what it
// recorded; first also measures the database.
func (s *scale) recoverOnce(ctx context.Context, plugin, what string, first bool) (measured, error) {
	db, err := s.dbCopy()
	if err != nil {
		return measured{}, err
	}
	logf("N=%d: %s", s.n, what)
	var out strings.Builder
	m, err := s.cl.run(ctx, procSpec{
		argv:    []string{plugin, "recover", "--once", "--state-db", db},
		env:     s.cl.env,
		ua:      pluginUA,
		settle:  true,
		stdout:  &out,
		timeout: 60 * time.Minute,
	})
	if err != nil {
		return m, err
	}
	if got := lastLine(out.String()); !strings.Contains(got, fmt.Sprintf("changed %d,", s.n)) {
		return m, fmt.Errorf("recover --once printed %q, want every one of the %d records changed", got, s.n)
	}
	if err := s.checkRecovered(ctx, db); err != nil {
		return m, err
	}
	if first {
		if s.res.dbBytes, s.res.events, err = dbSize(ctx, db); err != nil {
			return m, err
		}
		if s.synced, err = copyDB(db, filepath.Join(s.cl.tmp, "synced")); err != nil {
			return m, err
		}
	}
	return m, os.RemoveAll(filepath.Dir(db))
}

// recoverSynced runs one `recover --once` of the plugin on a fresh copy of the database a first
// recover left: the records already say what the cluster shows, so it lists the same objects,
// reattaches the non-terminal records and records nothing (the steady state after a restart,
// where recoverOnce is the worst case).
func (s *scale) recoverSynced(ctx context.Context, what string) (measured, error) {
	s.runs++
	db, err := copyDB(s.synced, filepath.Join(s.cl.tmp, fmt.Sprintf("db-%03d", s.runs)))
	if err != nil {
		return measured{}, err
	}
	logf("N=%d: %s", s.n, what)
	var out strings.Builder
	m, err := s.cl.run(ctx, procSpec{
		argv:    []string{s.o.plugin, "recover", "--once", "--state-db", db},
		env:     s.cl.env,
		ua:      pluginUA,
		settle:  true,
		stdout:  &out,
		timeout: 60 * time.Minute,
	})
	if err != nil {
		return m, err
	}
	if got := lastLine(out.String()); !strings.Contains(got, "changed 0,") {
		return m, fmt.Errorf("recover --once on a database in sync printed %q, want nothing changed", got)
	}
	if err := s.checkRecovered(ctx, db); err != nil {
		return m, err
	}
	return m, os.RemoveAll(filepath.Dir(db))
}

// holdFor writes the cluster's environment to a file and waits until it is removed (see -hold).
func (s *scale) holdFor(ctx context.Context) error {
	f := filepath.Join(s.cl.tmp, "hold.env")
	env := append(slices.Clone(s.cl.env), "TEMPLATE_DB="+s.template, "LIMIT_BIN="+limitBin, "LIMIT_SCOPE="+s.limitScope())
	if err := os.WriteFile(f, holdenv.Format(env), 0o600); err != nil {
		return err
	}
	logf("N=%d: holding; the environment is in %s (remove it to go on)", s.n, f)
	for {
		if _, err := os.Stat(f); errors.Is(err, os.ErrNotExist) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// checkRecovered fails unless the database holds what the cluster does.
func (s *scale) checkRecovered(ctx context.Context, db string) error {
	st, err := states(ctx, db)
	if err != nil {
		return err
	}
	l := s.load
	want := map[store.State]int{store.StateRunning: l.running, store.StateExited: l.idlePerKind(), store.StatePaused: l.idlePerKind()}
	for k, v := range want {
		if v == 0 {
			delete(want, k)
		}
	}
	if fmt.Sprint(st) != fmt.Sprint(want) {
		return fmt.Errorf("recover left %v in the database, want %v", st, want)
	}
	return nil
}

// dbSize is the size of a closed database (the file; the WAL is checkpointed and removed at the
// last close) and the number of its events.
func dbSize(ctx context.Context, path string) (int64, int, error) {
	st, err := store.Open(ctx, path)
	if err != nil {
		return 0, 0, err
	}
	evs, err := st.EventsSince(ctx, 0)
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, 0, err
	}
	var size int64
	for _, suffix := range []string{"", "-wal"} {
		if fi, err := os.Stat(path + suffix); err == nil {
			size += fi.Size()
		}
	}
	return size, len(evs), nil
}

// measureLimit runs the limit program (hack/bench/limit): a bare streaming watch-list of the same
// objects, decoded and dropped. With -baseline its runs were made between the recovers already.
func (s *scale) measureLimit(ctx context.Context) error {
	runs := s.interleavedLimit
	var last limitResult
	for i := 0; len(s.interleavedLimit) == 0 && i < s.o.reps; i++ {
		m, l, err := s.limitOnce(ctx, i)
		if err != nil {
			return err
		}
		runs, last = append(runs, m), l
	}
	if last.Mode == "" {
		last.Mode = s.o.limitMode
	}
	scope := "per namespace"
	if s.limitScope() == "" {
		scope = "cluster-wide"
	}
	what := fmt.Sprintf("limit: a bare %s (%s, as the plugin's) of the same deployments and jobs (client-go, protobuf, objects dropped)", last.Mode, scope)
	if len(s.interleavedLimit) > 0 {
		what += ", interleaved with the recover runs above"
	}
	s.res.rows = append(s.res.rows, medianRow("limit", what, runs))
	return nil
}

// limitOnce runs the limit program once and checks it saw every object.
func (s *scale) limitOnce(ctx context.Context, i int) (measured, limitResult, error) {
	var last limitResult
	logf("N=%d: the limit program, %s (%d/%d)", s.n, s.o.limitMode, i+1, s.o.reps)
	var out strings.Builder
	m, err := s.cl.run(ctx, procSpec{argv: []string{limitBin, "-kubeconfig", s.cl.kubeconfig, "-mode", s.o.limitMode, "-namespace", s.limitScope()},
		env: s.cl.env, ua: limitUA, stdout: &out, settle: true})
	if err != nil {
		return m, last, err
	}
	if err := json.Unmarshal([]byte(lastLine(out.String())), &last); err != nil {
		return m, last, fmt.Errorf("limit printed %q: %w", out.String(), err)
	}
	if got := last.Objects["deployments"] + last.Objects["jobs"]; got != s.n {
		return m, last, fmt.Errorf("the limit program received %d objects (%v), want %d", got, last.Objects, s.n)
	}
	return m, last, nil
}

// limitScope is the limit program's -namespace: the load's namespaces, read one by one as the plugin
// reads up to monitor.DefaultClusterWide of them, or "" (cluster-wide watch-lists with the label
// selector) above that, as the plugin does.
func (s *scale) limitScope() string {
	nss := s.load.namespaces()
	if len(nss) > monitor.DefaultClusterWide {
		return ""
	}
	return strings.Join(nss, ",")
}

// getScope is kubectl get's namespace flags: -n NS for one namespace, -A for more.
func (s *scale) getScope() []string {
	if nss := s.load.namespaces(); len(nss) == 1 {
		return []string{"-n", nss[0]}
	}
	return []string{"-A"}
}

// measureGet runs `kubectl get deploy,job -l gobrave-workload -o name` on the same objects.
func (s *scale) measureGet(ctx context.Context) error {
	var runs []measured
	argv := append(append([]string{s.cl.kubectl(), "get", "deploy,job"}, s.getScope()...), "-l", "gobrave-workload", "-o", "name")
	for i := range s.o.reps {
		if i > 0 && onceEnough(runs[0].Wall, s.o.slowOnce) {
			logf("N=%d: kubectl get -o name took %s: one run is enough (-slow-once %s)", s.n, secs(runs[0].Wall), s.o.slowOnce)
			break
		}
		logf("N=%d: kubectl get -o name (%d/%d)", s.n, i+1, s.o.reps)
		m, err := s.cl.run(ctx, procSpec{argv: argv, env: s.cl.env, ua: kubectlUA, settle: true})
		if err != nil {
			return err
		}
		if m.Lines != s.n {
			return fmt.Errorf("kubectl get -o name printed %d lines, want %d", m.Lines, s.n)
		}
		runs = append(runs, m)
	}
	what := "`kubectl " + strings.Join(argv[1:], " ") + "`"
	if len(runs) < s.o.reps {
		what += fmt.Sprintf(" (%d run: the first took over %s)", len(runs), s.o.slowOnce)
	}
	s.res.rows = append(s.res.rows, medianRow("get", what, runs))
	return nil
}

// onceEnough says whether a reference command (kubectl get, not the plugin or the limit) whose
// first run took first needs no repeats: at 100,000 each run takes 1–4 minutes and 4.4 GiB, and
// its repeats were a fifth of the whole run's time; kubectl is the same in every re-measure of
// the plugin, and the goal (recover ≤ 0.5 × kubectl) is nowhere near its noise. 0: always repeat.
func onceEnough(first, limit time.Duration) bool {
	return limit > 0 && first > limit
}

// measurePs runs `ps` (every record non-terminal: the template database) to /dev/null, and
// `ps -a` until its first row.
func (s *scale) measurePs(ctx context.Context) error {
	db, err := s.dbCopy()
	if err != nil {
		return err
	}
	// Once to a pipe, to check the rows.
	m, err := s.cl.run(ctx, procSpec{argv: []string{s.o.plugin, "ps", "--state-db", db}, env: s.cl.env, ua: pluginUA})
	if err != nil {
		return err
	}
	if m.Lines != s.n+1 {
		return fmt.Errorf("ps printed %d lines, want %d", m.Lines, s.n+1)
	}
	var ps, first []measured
	for i := range s.o.reps {
		logf("N=%d: ps > /dev/null and ps -a to its first row (%d/%d)", s.n, i+1, s.o.reps)
		m, err := s.cl.run(ctx, procSpec{argv: []string{s.o.plugin, "ps", "--state-db", db}, env: s.cl.env, ua: pluginUA, devNull: true})
		if err != nil {
			return err
		}
		ps = append(ps, m)
		lines := 0
		m, err = s.cl.run(ctx, procSpec{argv: []string{s.o.plugin, "ps", "-a", "--state-db", db}, env: s.cl.env, ua: pluginUA,
			until: func(string, time.Time) bool { lines++; return lines == 2 }}) // the header, then the first row
		if err != nil {
			return err
		}
		first = append(first, m)
	}
	s.res.rows = append(s.res.rows,
		medianRow("ps", fmt.Sprintf("`kubectl gobrave ps > /dev/null` (%d non-terminal records)", s.n), ps),
		medianRow("psfirst", "`kubectl gobrave ps -a`: its first row (to a pipe)", first))
	return nil
}

// profile runs recover --once once more in the driver's `profile` mode (CPU and allocation
// profiles) and once with GODEBUG=gctrace=1 (the heap over time), into -profile-dir.
func (s *scale) profile(ctx context.Context) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	dir := filepath.Join(s.o.profileDir, fmt.Sprintf("n%d", s.n))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	args := []string{"recover", "--once"}
	db, err := s.dbCopy()
	if err != nil {
		return err
	}
	logf("N=%d: profiling recover", s.n)
	argv := append([]string{self, "profile", "-cpuprofile", filepath.Join(dir, "recover.cpu"), "-memprofile", filepath.Join(dir, "recover.mem"), "--"}, args...)
	if _, err := s.cl.run(ctx, procSpec{argv: append(argv, "--state-db", db), env: s.cl.env, timeout: 60 * time.Minute}); err != nil {
		return err
	}
	if db, err = s.dbCopy(); err != nil {
		return err
	}
	logf("N=%d: tracing recover", s.n)
	argv = append([]string{self, "profile", "-trace", filepath.Join(dir, "recover.trace"), "--"}, args...)
	if _, err := s.cl.run(ctx, procSpec{argv: append(argv, "--state-db", db), env: s.cl.env, timeout: 60 * time.Minute}); err != nil {
		return err
	}
	if db, err = s.dbCopy(); err != nil {
		return err
	}
	m, err := s.cl.run(ctx, procSpec{argv: append([]string{s.o.plugin}, append(args, "--state-db", db)...),
		env: append(slices.Clone(s.cl.env), "GODEBUG=gctrace=1"), timeout: 60 * time.Minute})
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "recover.gctrace"), []byte(fmt.Sprintf("peak RSS %d KiB\n%s", m.MaxRSS, m.Stderr)), 0o644)
}
