package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
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
	monitor       measured
	monitorLast   time.Duration // last completion seen → monitor printed the last exit
	initial       time.Duration // monitor start → its line of the (N+L)th change (approximate: from the driver's clock)
	kwait         *measured
	kwaitLast     time.Duration // last completion seen → kubectl wait returned
	missing       int
}

type seenJob struct {
	cond, watch time.Time
}

// measureLatency releases o.latencyJobs held jobs within about 5 s while `monitor --all` runs, and
// `kubectl wait --for=condition=complete` side by side.
func (s *scale) measureLatency(ctx context.Context) (*latencyResult, error) {
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

	// The benchmark's own watch of the latency jobs.
	var mu sync.Mutex
	seen := map[string]seenJob{}
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
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
				if _, ok := seen[j.Name]; !ok {
					seen[j.Name] = seenJob{cond: cnd.LastTransitionTime.Time, watch: now}
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
	latID := map[string]bool{}
	for _, id := range ids {
		latID[id] = true
	}
	allRecorded := make(chan struct{})
	printed := map[string]time.Time{}
	var monErr error
	var monWG, kwWG sync.WaitGroup
	mctx, mcancel := context.WithCancel(ctx)
	defer func() { mcancel(); monWG.Wait(); kwWG.Wait() }()
	initial, exited := 0, 0
	want := s.n + L
	var recordedAt time.Time
	monWG.Go(func() {
		res.monitor, monErr = s.cl.run(mctx, procSpec{
			argv: []string{s.o.plugin, "monitor", "--all", "--follow", "-o", "json", "--state-db", db},
			env:  s.cl.env,
			ua:   pluginUA,
			until: func(line string, at time.Time) bool {
				var e struct{ RuntimeID, Type string }
				if json.Unmarshal([]byte(line), &e) != nil || e.Type == "" {
					return false
				}
				if initial < want {
					if initial++; initial == want {
						recordedAt = at
						close(allRecorded)
					}
					return false
				}
				if e.Type == string(store.ContainerExited) && latID[e.RuntimeID] {
					mu.Lock()
					printed[e.RuntimeID] = at
					mu.Unlock()
					exited++
				}
				return exited == L
			},
			timeout: 60 * time.Minute,
		})
	})
	monStart := time.Now()
	select {
	case <-allRecorded:
		res.initial = recordedAt.Sub(monStart)
	case <-ctx.Done():
		return res, ctx.Err()
	case <-time.After(40 * time.Minute):
		return res, fmt.Errorf("monitor --all did not record %d changes in 40 minutes (%d)", want, initial)
	}
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
	monWG.Wait()
	if monErr != nil {
		return res, monErr
	}
	logf("N=%d latency: monitor recorded %d exits; waiting for kubectl wait", s.n, L)
	kwWG.Wait()
	if kwErr != nil {
		return res, kwErr
	}
	res.kwait = &kw
	time.Sleep(500 * time.Millisecond)
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
	mu.Lock()
	defer mu.Unlock()
	var rc, rw, lc, lw, cw []time.Duration
	var firstSeen, lastSeen time.Time
	for name, id := range ids {
		sj, ok := seen[name]
		rt, ok2 := row[id]
		pt, ok3 := printed[id]
		if !ok || !ok2 || !ok3 {
			res.missing++
			continue
		}
		rc = append(rc, rt.Sub(sj.cond))
		rw = append(rw, rt.Sub(sj.watch))
		lc = append(lc, pt.Sub(sj.cond))
		lw = append(lw, pt.Sub(sj.watch))
		cw = append(cw, sj.watch.Sub(sj.cond))
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
	res.completions = lastSeen.Sub(firstSeen)
	var lastPrinted time.Time
	for _, t := range printed {
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
