package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

const pluginUA = "kubectl-gobrave/"
const kubectlUA = "kubectl/"

// row is one measured command in the report.
type row struct {
	key      string // for ratios
	phase    string
	what     string
	wall     time.Duration
	spread   string
	rss      int64 // KiB: the median over the runs
	rssRange string
	cpu      time.Duration
	requests int
	perObj   int
	load     float64
	extrap   bool   // wall and requests extrapolated (see note)
	note     string // what the requests were, checks, extrapolation
}

// scaleResult is everything measured at one N.
type scaleResult struct {
	n, nodes int
	setup    []string
	rows     []row
	latency  *latencyResult
	notes    []string
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
	cl       *cluster
	template string // the database with the N gobrave records, all created
	res      *scaleResult
	runs     int
}

func (s *scale) dbCopy() (string, error) {
	s.runs++
	return copyDB(s.template, filepath.Join(s.cl.tmp, fmt.Sprintf("db-%03d", s.runs)))
}

func runScale(ctx context.Context, o options, n int) (*scaleResult, error) {
	res := &scaleResult{n: n, nodes: (2*n+o.latencyJobs)/100 + 2}
	s := &scale{o: o, n: n, res: res}
	logf("N=%d: starting a cluster with %d nodes", n, res.nodes)
	t0 := time.Now()
	cl, err := startCluster(ctx, o.root, res.nodes)
	defer cl.down()
	if err != nil {
		return res, err
	}
	s.cl = cl
	res.setup = append(res.setup, fmt.Sprintf("cluster with %d nodes up in %s", res.nodes, secs(time.Since(t0))))
	c := cl.client
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNS}}, metav1.CreateOptions{}); err != nil {
		return res, err
	}
	for { // pods need the default ServiceAccount
		if _, err := c.CoreV1().ServiceAccounts(benchNS).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(200 * time.Millisecond):
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
	res.notes = append(res.notes, fmt.Sprintf("RSS floors (a process that does nothing): the plugin (`version --client`) %s MiB, kubectl (`version --client`) %s MiB, this benchmark's binary, which runs the per-ID baseline, %s MiB",
		mib(floorP.MaxRSS), mib(floorK.MaxRSS), mib(floorB.MaxRSS)))

	t0 = time.Now()
	logf("N=%d: creating %d gobrave workloads", n, n)
	made, err := createGobrave(ctx, c, gobraveSpecs(n))
	if err != nil {
		return res, fmt.Errorf("create gobrave workloads: %w", err)
	}
	s.template = filepath.Join(cl.tmp, "template", "state.db")
	if err := os.MkdirAll(filepath.Dir(s.template), 0o700); err != nil {
		return res, err
	}
	if err := record(ctx, s.template, made); err != nil {
		return res, fmt.Errorf("record: %w", err)
	}
	created := time.Since(t0)
	if err := waitRunning(ctx, c, "gobrave-workload", n/2, n/2, 30*time.Minute); err != nil {
		return res, err
	}
	res.setup = append(res.setup, fmt.Sprintf("%d gobrave workloads created and recorded in %s, all running after %s", n, secs(created), secs(time.Since(t0))))

	if err := s.measurePlugin(ctx, "gobrave only"); err != nil {
		return res, err
	}
	if o.skip["unrelated"] {
		return res, nil
	}
	t0 = time.Now()
	logf("N=%d: creating %d unrelated deployments and jobs", n, n)
	if err := createUnrelated(ctx, c, n); err != nil {
		return res, fmt.Errorf("create unrelated workloads: %w", err)
	}
	if err := waitRunning(ctx, c, "!gobrave-workload", n/2, n/2, 30*time.Minute); err != nil {
		return res, err
	}
	res.setup = append(res.setup, fmt.Sprintf("%d unrelated workloads (no gobrave label, same namespace) running after %s", n, secs(time.Since(t0))))
	if err := s.measurePlugin(ctx, "with unrelated"); err != nil {
		return res, err
	}
	if !o.skip["ps"] {
		if err := s.measurePs(ctx); err != nil {
			return res, err
		}
	}
	if !o.skip["peers"] {
		if err := s.measureKubectl(ctx); err != nil {
			return res, err
		}
	}
	if !o.skip["baseline"] {
		if err := s.measureBaseline(ctx); err != nil {
			return res, err
		}
	}
	if !o.skip["latency"] && o.latencyJobs > 0 {
		l, err := s.measureLatency(ctx)
		res.latency = l
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// medianRow turns repeated runs into a row (median wall time; its RSS, CPU and requests).
// medianRow turns repeated runs into a row: the median wall time (with its run's CPU, requests and
// load) and, separately, the median peak RSS, with the ranges.
func medianRow(key, phase, what string, ms []measured) row {
	m := median(ms)
	rss := make([]int64, len(ms))
	for i, x := range ms {
		rss[i] = x.MaxRSS
	}
	slices.Sort(rss)
	r := row{key: key, phase: phase, what: what, wall: m.Wall, spread: spread(ms), rss: rss[len(rss)/2], cpu: m.CPU,
		requests: len(m.Requests), perObj: perObjectCount(m.Requests), load: m.Load, note: summarize(m.Requests)}
	if len(rss) > 1 {
		r.rssRange = mib(rss[0]) + "–" + mib(rss[len(rss)-1])
	}
	return r
}

// measurePlugin runs `recover --once` and `monitor --all` on fresh copies of the database.
func (s *scale) measurePlugin(ctx context.Context, phase string) error {
	key := "clean"
	if phase != "gobrave only" {
		key = "unrelated"
	}
	var runs []measured
	for i := range s.o.reps {
		db, err := s.dbCopy()
		if err != nil {
			return err
		}
		logf("N=%d %s: recover --once (%d/%d)", s.n, phase, i+1, s.o.reps)
		var out strings.Builder
		m, err := s.cl.run(ctx, procSpec{
			argv:   []string{s.o.plugin, "recover", "--once", "--state-db", db},
			env:    s.cl.env,
			ua:     pluginUA,
			stdout: &out,
		})
		if err != nil {
			return err
		}
		if got, want := lastLine(out.String()), fmt.Sprintf("reattached %d, changed %d, now terminal 0", s.n, s.n); got != want {
			return fmt.Errorf("recover --once printed %q, want %q", got, want)
		}
		if err := s.checkRunning(ctx, db, "recover --once"); err != nil {
			return err
		}
		runs = append(runs, m)
	}
	r := medianRow("recover/"+key, phase, "`kubectl gobrave recover --once`", runs)
	s.res.rows = append(s.res.rows, r)

	runs = nil
	for i := range s.o.reps {
		db, err := s.dbCopy()
		if err != nil {
			return err
		}
		logf("N=%d %s: monitor --all (%d/%d)", s.n, phase, i+1, s.o.reps)
		started := 0
		m, err := s.cl.run(ctx, procSpec{
			argv: []string{s.o.plugin, "monitor", "--all", "-o", "json", "--state-db", db},
			env:  s.cl.env,
			ua:   pluginUA,
			until: func(line string, _ time.Time) bool {
				var e struct{ Type string }
				if json.Unmarshal([]byte(line), &e) == nil && e.Type == string(store.ContainerStarted) {
					started++
				}
				return started == s.n
			},
		})
		if err != nil {
			return err
		}
		if err := s.checkRunning(ctx, db, "monitor --all"); err != nil {
			return err
		}
		runs = append(runs, m)
	}
	r = medianRow("monitor/"+key, phase, "`kubectl gobrave monitor --all` (to the last state recorded)", runs)
	s.res.rows = append(s.res.rows, r)
	if s.o.profileDir != "" && key == "clean" {
		return s.profile(ctx)
	}
	return nil
}

// profile runs recover --once and monitor --all once more each in the driver's `profile` mode (CPU
// and allocation profiles) and once with GODEBUG=gctrace=1 (the heap over time), into -profile-dir.
func (s *scale) profile(ctx context.Context) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	dir := filepath.Join(s.o.profileDir, fmt.Sprintf("n%d", s.n))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, verb := range []string{"recover", "monitor"} {
		args := []string{"recover", "--once"}
		if verb == "monitor" {
			args = []string{"monitor", "--all", "-o", "json"}
		}
		untilAll := func() func(string, time.Time) bool { // a fresh count for each run
			if verb == "recover" {
				return nil
			}
			started := 0
			return func(line string, _ time.Time) bool {
				var e struct{ Type string }
				if json.Unmarshal([]byte(line), &e) == nil && e.Type == string(store.ContainerStarted) {
					started++
				}
				return started == s.n
			}
		}
		db, err := s.dbCopy()
		if err != nil {
			return err
		}
		logf("N=%d: profiling %s", s.n, verb)
		argv := append([]string{self, "profile", "-cpuprofile", filepath.Join(dir, verb+".cpu"), "-memprofile", filepath.Join(dir, verb+".mem"), "--"}, args...)
		if _, err := s.cl.run(ctx, procSpec{argv: append(argv, "--state-db", db), env: s.cl.env, until: untilAll()}); err != nil {
			return err
		}
		if db, err = s.dbCopy(); err != nil {
			return err
		}
		m, err := s.cl.run(ctx, procSpec{argv: append([]string{s.o.plugin}, append(args, "--state-db", db)...),
			env: append(slices.Clone(s.cl.env), "GODEBUG=gctrace=1"), until: untilAll()})
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, verb+".gctrace"), []byte(fmt.Sprintf("peak RSS %d KiB\n%s", m.MaxRSS, m.Stderr)), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// checkRunning fails unless every record of the database is running.
func (s *scale) checkRunning(ctx context.Context, db, what string) error {
	st, err := states(ctx, db)
	if err != nil {
		return err
	}
	if st[store.StateRunning] != s.n {
		return fmt.Errorf("%s left %v in the database, want %d running", what, st, s.n)
	}
	return nil
}

// measurePs compares `ps` over the recorded database with `kubectl get deploy,job -A -l`.
func (s *scale) measurePs(ctx context.Context) error {
	db, err := s.dbCopy()
	if err != nil {
		return err
	}
	// Every record running, as after a recover.
	if _, err := s.cl.run(ctx, procSpec{argv: []string{s.o.plugin, "recover", "--once", "--state-db", db}, env: s.cl.env}); err != nil {
		return err
	}
	var ps, get []measured
	for i := range s.o.reps {
		logf("N=%d: ps and kubectl get (%d/%d)", s.n, i+1, s.o.reps)
		m, err := s.cl.run(ctx, procSpec{argv: []string{s.o.plugin, "ps", "--state-db", db}, env: s.cl.env, ua: pluginUA})
		if err != nil {
			return err
		}
		if m.Lines != s.n+1 {
			return fmt.Errorf("ps printed %d lines, want %d", m.Lines, s.n+1)
		}
		ps = append(ps, m)
		m, err = s.cl.run(ctx, procSpec{argv: []string{s.cl.kubectl(), "get", "deploy,job", "-A", "-l", "gobrave-workload"}, env: s.cl.env, ua: kubectlUA})
		if err != nil {
			return err
		}
		if m.Lines < s.n+1 {
			return fmt.Errorf("kubectl get printed %d lines, want at least %d", m.Lines, s.n+1)
		}
		get = append(get, m)
	}
	s.res.rows = append(s.res.rows,
		medianRow("ps", "with unrelated", "`kubectl gobrave ps` (the database only)", ps),
		medianRow("get", "with unrelated", "`kubectl get deploy,job -A -l gobrave-workload`", get))
	return nil
}

// measureKubectl runs what users reach for today: kubectl wait on the jobs being running (held jobs
// never complete) and kubectl rollout status on the deployments.
func (s *scale) measureKubectl(ctx context.Context) error {
	perKind := s.n / 2
	sel := "gobrave-workload"
	scaleBy := 1.0
	if s.o.peerCap > 0 && perKind > s.o.peerCap {
		// The first peerCap of each kind by name: svc-00000.. and task-00000.. .
		var names []string
		for i := range s.o.peerCap {
			names = append(names, fmt.Sprintf("svc-%05d", i), fmt.Sprintf("task-%05d", i))
		}
		sel = "gobrave-workload in (" + strings.Join(names, ",") + ")"
		scaleBy = float64(perKind) / float64(s.o.peerCap)
	}
	var wait, rollout []measured
	for i := range s.o.reps {
		logf("N=%d: kubectl wait (jobs) and kubectl rollout status (deployments) (%d/%d)", s.n, i+1, s.o.reps)
		m, err := s.cl.run(ctx, procSpec{argv: []string{s.cl.kubectl(), "wait", "--for=jsonpath={.status.ready}=1", "job",
			"-n", benchNS, "-l", sel, "--timeout=60m"}, env: s.cl.env, ua: kubectlUA, timeout: 90 * time.Minute})
		if err != nil {
			return err
		}
		wait = append(wait, m)
		m, err = s.cl.run(ctx, procSpec{argv: []string{s.cl.kubectl(), "rollout", "status", "deployment",
			"-n", benchNS, "-l", sel, "--timeout=60m"}, env: s.cl.env, ua: kubectlUA, timeout: 90 * time.Minute})
		if err != nil {
			return err
		}
		rollout = append(rollout, m)
		if scaleBy > 1 || perKind > 1000 {
			break // long runs (minutes at 5 QPS): once
		}
	}
	w := medianRow("kwait", "with unrelated", "`kubectl wait --for=jsonpath={.status.ready}=1 job -l gobrave-workload`", wait)
	r := medianRow("rollout", "with unrelated", "`kubectl rollout status deployment -l gobrave-workload`", rollout)
	both := row{key: "kubectl", phase: "with unrelated", what: "both kubectl commands, one after the other",
		wall: w.wall + r.wall, rss: max(w.rss, r.rss), cpu: w.cpu + r.cpu, requests: w.requests + r.requests,
		perObj: w.perObj + r.perObj, load: w.load}
	if scaleBy > 1 {
		for _, x := range []*row{&w, &r, &both} {
			x.extrap = true
			x.note = fmt.Sprintf("EXTRAPOLATED ×%.1f from %d objects per kind (wall and per-object requests); measured: %s, %d requests (%s)",
				scaleBy, s.o.peerCap, secs(x.wall), x.requests, x.note)
			x.wall = time.Duration(float64(x.wall) * scaleBy)
			x.requests = x.requests - x.perObj + int(float64(x.perObj)*scaleBy)
			x.perObj = int(float64(x.perObj) * scaleBy)
		}
	}
	s.res.rows = append(s.res.rows, w, r, both)
	return nil
}

// measureBaseline runs the original per-ID design (bench baseline) on a fresh database.
func (s *scale) measureBaseline(ctx context.Context) error {
	db, err := s.dbCopy()
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	limit := 0
	if s.o.baselineCap > 0 && s.n > s.o.baselineCap {
		limit = s.o.baselineCap
	}
	gets := s.n
	if limit > 0 {
		gets = limit
	}
	logf("N=%d: the per-ID baseline (%d GETs at 5 QPS: about %d s)", s.n, gets, gets/5)
	var stdout strings.Builder
	m, err := s.cl.run(ctx, procSpec{argv: []string{self, "baseline", "-kubeconfig", s.cl.kubeconfig, "-state-db", db, "-limit", fmt.Sprint(limit)},
		env: s.cl.env, ua: baselineUA, stdout: &stdout, timeout: 2 * time.Hour})
	if err != nil {
		return err
	}
	var b baselineResult
	if err := json.Unmarshal([]byte(stdout.String()), &b); err != nil {
		return fmt.Errorf("baseline output %q: %w", stdout.String(), err)
	}
	r := row{key: "baseline", phase: "with unrelated", what: "per-ID baseline: unfiltered cluster-wide informers + one GET per ID at 5 QPS, burst 10",
		wall: m.Wall, rss: m.MaxRSS, cpu: m.CPU, requests: len(m.Requests), perObj: perObjectCount(m.Requests), load: m.Load}
	r.note = fmt.Sprintf("informers synced after %.2f s with %d objects cached; %d GETs in %.1f s; %d states recorded", b.SyncMs/1000, b.Cached, b.GETs, b.GETsMs/1000, b.Recorded)
	if b.GETs < b.IDs {
		scaleBy := float64(b.IDs) / float64(b.GETs)
		r.extrap = true
		measuredWall := r.wall
		r.wall += time.Duration((scaleBy - 1) * b.GETsMs * float64(time.Millisecond))
		r.requests = r.requests - r.perObj + b.IDs
		r.perObj = b.IDs
		r.note = fmt.Sprintf("EXTRAPOLATED: measured the first %d of %d GETs (%s wall, %d requests), the GET time scaled ×%.1f; %s",
			b.GETs, b.IDs, secs(measuredWall), len(m.Requests), scaleBy, r.note)
	} else if b.Recorded != s.n {
		return fmt.Errorf("baseline recorded %d states, want %d", b.Recorded, s.n)
	}
	s.res.rows = append(s.res.rows, r)
	return nil
}
