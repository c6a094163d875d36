package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gobrave/kubectl-gobrave/pkg/runtime"
	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/spec"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// The load of one N, sized for a 2-core control plane and the same shape at every N, so that the
// curves compare like with like: N gobrave workloads, N/2 deployments svc-NNNNNN and N/2 jobs
// task-NNNNNN, built by runtime.Build as `create` builds them (the gobrave-workload label, the
// gobrave.dev/spec annotation). Only a slice runs pods: R = running (by default 1% of N, see
// runningOf), the first R/2 of each kind, deployments at 1 replica and held jobs (docs/testing.md).
// The rest have none: deployments scaled to 0 (what `stop` does; with -pause-idle, the default,
// also paused: see createLoad) and jobs created suspended (what `pause` does, and Kueue).
//
// The load is spread over K namespaces (-namespaces, 100 by default, whatever N): workload pair i
// (svc-i, task-i) goes to namespace bench-(i mod K), so each holds N/K objects and the plugin, the
// limit program and kubectl read them the same way at every N (cluster-wide above
// monitor.DefaultClusterWide namespaces). With one namespace (K <= 1) it is named bench, as before.
// Why spread: the deployment controller's sync of a deployment lists its namespace's ReplicaSets,
// so with every object in one namespace its work grows with N² and 100,000 never settles
// (docs/performance.md). K never exceeds the N/2 pairs: no namespace is empty.
type loadShape struct {
	n, running int
	nss        int // namespaces (0 or 1: all in namespace bench)
}

// runningOf parses -running: a share of N ("1%") or a number of workloads ("1000"), rounded down
// to even (half deployments, half jobs) and capped at N.
func runningOf(v string, n int) (int, error) {
	var r int
	if p, ok := strings.CutSuffix(strings.TrimSpace(v), "%"); ok {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil || f < 0 || f > 100 {
			return 0, fmt.Errorf("-running wants a share of N from 0%% to 100%% or a number of workloads, got %q", v)
		}
		r = int(f * float64(n) / 100)
	} else {
		x, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || x < 0 {
			return 0, fmt.Errorf("-running wants a share of N from 0%% to 100%% or a number of workloads, got %q", v)
		}
		r = x
	}
	r = min(r, n)
	return r - r%2, nil
}

// nsCount is the number of namespaces the load spreads over.
func (l loadShape) nsCount() int {
	if l.nss <= 1 {
		return 1
	}
	return max(1, min(l.nss, l.perKind()))
}

// namespaces are the load's namespaces.
func (l loadShape) namespaces() []string {
	k := l.nsCount()
	if k == 1 {
		return []string{benchNS}
	}
	out := make([]string, k)
	for i := range k {
		out[i] = fmt.Sprintf("%s-%03d", benchNS, i)
	}
	return out
}

// where says, for the report, where the load is.
func (l loadShape) where() string {
	nss := l.namespaces()
	if len(nss) == 1 {
		return "in namespace " + nss[0]
	}
	return fmt.Sprintf("spread over %d namespaces %s ... %s (%d objects in each, at most)", len(nss), nss[0], nss[len(nss)-1], 2*((l.perKind()+len(nss)-1)/len(nss)))
}

// nsOf is the namespace of workload pair i.
func (l loadShape) nsOf(i int) string {
	k := l.nsCount()
	if k == 1 {
		return benchNS
	}
	return fmt.Sprintf("%s-%03d", benchNS, i%k)
}

func (l loadShape) perKind() int    { return l.n / 2 }
func (l loadShape) runPerKind() int { return l.running / 2 }

// idle is the number of workloads without pods, per kind.
func (l loadShape) idlePerKind() int { return l.perKind() - l.runPerKind() }

// loadSpecs are the workloads of the load, and for each whether it runs.
func (l loadShape) specs() ([]spec.ContainerSpec, []bool) {
	specs := make([]spec.ContainerSpec, 0, l.n)
	runs := make([]bool, 0, l.n)
	for i := range l.perKind() {
		run := i < l.runPerKind()
		ns := l.nsOf(i)
		job := spec.ContainerSpec{Name: fmt.Sprintf("task-%06d", i), Image: benchImage, WorkloadKind: runtimeid.KindJob, RuntimeNamespace: ns}
		if run {
			job.Labels = map[string]string{labelHold: "true"}
		}
		specs = append(specs,
			spec.ContainerSpec{Name: fmt.Sprintf("svc-%06d", i), Image: benchImage, WorkloadKind: runtimeid.KindDeployment, RuntimeNamespace: ns},
			job)
		runs = append(runs, run, run)
	}
	return specs, runs
}

// createLoad creates the load with client-go (rate limits lifted, workers at once), each object in
// its spec's RuntimeNamespace, and returns the objects made, in the order of specs.
//
// With pauseIdle the deployments at 0 are also created paused, without a progress deadline (see
// -pause-idle).
func createLoad(ctx context.Context, c kubernetes.Interface, specs []spec.ContainerSpec, runs []bool, workers int, pauseIdle bool) ([]made, error) {
	out := make([]made, len(specs))
	var done atomic.Int64
	start := time.Now()
	stop := make(chan struct{})
	defer close(stop)
	go func() { // progress on stderr
		t := time.NewTicker(15 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				d := done.Load()
				logf("  created %d/%d (%.0f/s)", d, len(specs), float64(d)/time.Since(start).Seconds())
			}
		}
	}()
	err := parallelN(ctx, len(specs), workers, func(i int) error {
		s := specs[i]
		ns := s.RuntimeNamespace
		if err := s.Validate(); err != nil {
			return err
		}
		objs, err := runtime.Build(s, ns)
		if err != nil {
			return err
		}
		var uid string
		switch {
		case objs.Deployment != nil:
			if !runs[i] {
				objs.Deployment.Spec.Replicas = ptr.To(int32(0))
				if pauseIdle {
					// runtime.DeploymentEvent maps it as it maps any deployment at 0 (exited):
					// it reads neither field. Paused, the controller makes no ReplicaSet; with
					// no deadline it writes no Progressing condition first: one status write,
					// no conflict to retry through its 10/s rate-limited queue.
					objs.Deployment.Spec.Paused = true
					objs.Deployment.Spec.ProgressDeadlineSeconds = ptr.To(int32(math.MaxInt32))
				}
			}
			d, err := c.AppsV1().Deployments(ns).Create(ctx, objs.Deployment, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			uid = string(d.UID)
		case objs.Job != nil:
			if !runs[i] {
				objs.Job.Spec.Suspend = ptr.To(true)
			}
			j, err := c.BatchV1().Jobs(ns).Create(ctx, objs.Job, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			uid = string(j.UID)
		}
		s.Normalize()
		out[i] = made{s: s, uid: uid}
		done.Add(1)
		return nil
	})
	return out, err
}

// settled counts the load's objects by what gobrave would observe of them now (runtime's mapping).
type settled struct {
	started, exited, paused, other int
}

// waitSettled polls, in pages of 5,000 across all namespaces, until the controllers have caught up: the running slice
// running, the deployments at 0 observed (exited), the suspended jobs suspended (paused). It gives up when the
// counts stop moving for stall (the controllers are stuck, not slow) or after limit in all: a loaded machine
// settles 100,000 objects more slowly but still settles them.
func waitSettled(ctx context.Context, c kubernetes.Interface, l loadShape, stall, limit time.Duration) (settled, error) {
	want := settled{started: l.running, exited: l.idlePerKind(), paused: l.idlePerKind()}
	return waitProgress(ctx, want, func(ctx context.Context) (settled, error) { return countSettled(ctx, c) }, 10*time.Second, stall, limit)
}

// waitProgress calls count every poll until it returns want. It fails when no count has changed (nor a
// failing count recovered) for stall, or when limit has passed since it started.
func waitProgress(ctx context.Context, want settled, count func(context.Context) (settled, error), poll, stall, limit time.Duration) (settled, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	start := time.Now()
	var s settled
	last, moved := "", start
	for {
		var err error
		s, err = count(ctx)
		if err == nil && s == want {
			logf("  settled after %s: %+v", time.Since(start).Round(time.Second), s)
			return s, nil
		}
		msg := fmt.Sprintf("%+v, want %+v (%v)", s, want, err)
		if msg != last {
			logf("  waiting: %s", msg)
			last, moved = msg, time.Now()
		} else if still := time.Since(moved); still >= stall {
			return s, fmt.Errorf("not settled: no progress for %s: %s", still.Round(time.Second), msg)
		}
		select {
		case <-ctx.Done():
			return s, fmt.Errorf("not settled after %s: %s: %w", time.Since(start).Round(time.Second), msg, ctx.Err())
		case <-time.After(poll):
		}
	}
}

func countSettled(ctx context.Context, c kubernetes.Interface) (settled, error) {
	var s settled
	count := func(o runtime.Observation, ok bool) {
		switch {
		case !ok:
			s.other++
		case o.Type == store.ContainerStarted:
			s.started++
		case o.Type == store.ContainerExited:
			s.exited++
		case o.Type == store.ContainerPaused:
			s.paused++
		default:
			s.other++
		}
	}
	opts := metav1.ListOptions{LabelSelector: "gobrave-workload", Limit: 5000}
	for {
		ds, err := c.AppsV1().Deployments(metav1.NamespaceAll).List(ctx, opts)
		if err != nil {
			return s, err
		}
		for i := range ds.Items {
			count(runtime.DeploymentEvent(&ds.Items[i]))
		}
		if opts.Continue = ds.Continue; opts.Continue == "" {
			break
		}
	}
	opts.Continue = ""
	for {
		js, err := c.BatchV1().Jobs(metav1.NamespaceAll).List(ctx, opts)
		if err != nil {
			return s, err
		}
		for i := range js.Items {
			count(runtime.JobEvent(&js.Items[i]))
		}
		if opts.Continue = js.Continue; opts.Continue == "" {
			break
		}
	}
	return s, nil
}

// recordLoad builds the plugin's records of the load in the database at path with the store API:
// each workload Put (state created, event Created, as `create` records it); those without pods
// then recorded as started (ContainerStarted, applied in batches of 500), so their history is that
// of a workload that ran and was stopped or paused while nothing watched. The running slice stays
// created: it started while nothing watched. `recover` finds every record changed.
func recordLoad(ctx context.Context, path string, ms []made, runs []bool) error {
	st, err := store.Open(ctx, path)
	if err != nil {
		return err
	}
	if err := recordInto(ctx, st, ms, runs); err != nil {
		st.Close()
		return err
	}
	return st.Close()
}

func recordInto(ctx context.Context, st *store.Store, ms []made, runs []bool) error {
	var started []store.Transition
	for i, m := range ms {
		ns := m.s.RuntimeNamespace
		id, err := runtimeid.New(runtimeid.RuntimeK8s, ns, m.s.Kind(), m.s.Name)
		if err != nil {
			return err
		}
		w := store.Workload{
			RuntimeID: id.String(), Runtime: runtimeid.RuntimeK8s, Namespace: ns, Kind: id.Kind, Name: m.s.Name,
			UID: m.uid, Spec: m.s, State: store.StateCreated,
		}
		ev := store.Transition{Type: store.Created, Message: id.Kind + "/" + m.s.Name + " created", UID: m.uid}
		if err := st.Put(ctx, w, ev); err != nil {
			return err
		}
		if !runs[i] {
			started = append(started, store.Transition{RuntimeID: id.String(), Type: store.ContainerStarted, UID: m.uid})
		}
	}
	for batch := range slices.Chunk(started, 500) {
		as, err := st.ApplyBatch(ctx, batch)
		if err != nil {
			return err
		}
		for _, a := range as {
			if !a.Applied {
				return fmt.Errorf("%s: ContainerStarted not applied (state %s)", a.Event.RuntimeID, a.Workload.State)
			}
		}
	}
	return nil
}
