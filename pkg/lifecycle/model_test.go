package lifecycle_test

// TestModel is a model-based (state machine) test of the lifecycle engine,
// the store and the monitor together, with pgregory.net/rapid. It draws
// sequences of user verbs (create, start, resume, restart, stop, pause,
// delete, update of the spec)
// applied through lifecycle.Engine by 3 simulated processes sharing one
// database file, controller steps of a simulated cluster, `recover --once`
// passes, pauses of a process at any step of a verb, kills of a paused
// process (its API call reaching the server or not), failed API calls and
// verbs of two processes run at once, jobs suspended and unsuspended from
// outside (kubectl patch, Kueue); and checks, after every action and
// after quiescence, that the record is the truth (issue 12), and that the
// revisions of every record are numbered 1..N without a gap and never lose
// the spec of an update that returned nil (issue 15). See
// docs/testing.md, "Model-based test".
//
// The unit run does a few sequences; make test-model runs thousands:
//
//	go test -run '^TestModel$' ./pkg/lifecycle/ -rapid.checks=10000

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"pgregory.net/rapid"

	"github.com/gobrave/kubectl-gobrave/pkg/lifecycle"
	"github.com/gobrave/kubectl-gobrave/pkg/monitor"
	"github.com/gobrave/kubectl-gobrave/pkg/runtime"
	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/spec"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

const (
	// unitChecks is the number of sequences of the normal unit run, unless
	// -rapid.checks (or RAPID_CHECKS) says otherwise.
	unitChecks = 12
	// processes is the number of simulated kubectl-gobrave processes.
	processes = 3
	// maxRecoverPasses bounds the `recover --once` passes of a quiescence:
	// one more pass than this that still changes a record is a failure.
	maxRecoverPasses = 4
)

func TestModel(t *testing.T) {
	if _, err := os.Hostname(); err != nil {
		t.Skipf("no host name, so no dead-process leases: %v", err)
	}
	setDefault(t, "rapid.checks", "RAPID_CHECKS", strconv.Itoa(unitChecks))
	// A killed verb may be waiting for a previous job that only a
	// controller step removes; the harness waits a minute for it to
	// return, so it must give up well before (on 2 loaded cores it did not).
	defer func(d time.Duration) { runtime.JobGoneTimeout = d }(runtime.JobGoneTimeout)
	runtime.JobGoneTimeout = 5 * time.Second
	dir := t.TempDir()
	seq := 0
	rapid.Check(t, func(rt *rapid.T) {
		seq++
		m := newModel(rt, filepath.Join(dir, strconv.Itoa(seq)))
		rt.Repeat(map[string]func(*rapid.T){
			"create":     m.create,
			"start":      m.start,
			"restart":    m.restart,
			"suspend":    m.suspend,
			"stop":       m.stop,
			"delete":     m.delete,
			"update":     m.update,
			"resume":     m.resume,
			"kill":       m.kill,
			"concurrent": m.concurrent,
			"controller": m.controller,
			"recover":    m.recover,
			"quiesce":    m.quiesce,
			"":           m.check,
		})
		m.finish(rt)
	})
}

// setDefault sets flag name to value for this test unless the command line
// or the environment variable env set it.
func setDefault(t *testing.T, name, env, value string) {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	if _, ok := os.LookupEnv(env); set || ok {
		return
	}
	f := flag.Lookup(name)
	old := f.Value.String()
	if err := f.Value.Set(value); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Value.Set(old) })
}

// model is one sequence: the cluster, the processes and the database file.
type model struct {
	ctx      context.Context
	dir      string
	path     string
	host     string
	cluster  *cluster
	procs    []*process
	started  int          // processes started so far, for their names
	obs      *store.Store // the test's own handle, for reading
	monitors int

	mu      sync.Mutex
	updated []updated // every update that returned nil
}

// updated is an update that returned nil: revision of runtimeID holds image.
type updated struct {
	runtimeID string
	revision  int
	image     string
}

func newModel(t *rapid.T, dir string) *model {
	host, _ := os.Hostname()
	m := &model{ctx: t.Context(), dir: dir, path: filepath.Join(dir, "state.db"), host: host, cluster: newCluster()}
	t.Cleanup(m.close)
	var err error
	if m.obs, err = store.Open(m.ctx, m.path); err != nil {
		t.Fatal(err)
	}
	for range processes {
		p, err := m.newProcess()
		if err != nil {
			t.Fatal(err)
		}
		m.procs = append(m.procs, p)
	}
	return m
}

func (m *model) newProcess() (*process, error) {
	m.started++
	return startProcess(m.ctx, fmt.Sprintf("p%d", m.started), m.path, m.cluster)
}

// close kills every process (letting paused verbs go) and removes the files.
func (m *model) close() {
	for _, p := range m.procs {
		_ = p.kill(false)
	}
	if m.obs != nil {
		m.obs.Close()
	}
	os.RemoveAll(m.dir)
}

// --- actions ----------------------------------------------------------------

// verb is one user command of the model.
type verb struct {
	event store.EventType // store.Created for create
	w     workload
	image string // the new image of an update (SpecUpdated)
}

func (v verb) String() string {
	name := map[store.EventType]string{
		store.Created: "create", store.StartRequested: "start", store.ResumeRequested: "resume", store.RestartRequested: "restart",
		store.StopRequested: "stop", store.PauseRequested: "pause", store.DeleteRequested: "delete", store.SpecUpdated: "update",
	}[v.event]
	if v.event == store.SpecUpdated {
		return name + " " + v.w.String() + " --image " + v.image
	}
	return name + " " + v.w.String()
}

func (m *model) create(t *rapid.T) {
	p := m.drawIdle(t)
	m.run(t, p, verb{event: store.Created, w: rapid.SampledFrom(workloads).Draw(t, "workload")})
}

// images are the images an update draws from; create uses the first.
var images = []string{"busybox:1.36", "busybox:1.37", "busybox:1.38"}

// update changes a recorded workload's image (the same image: no change).
func (m *model) update(t *rapid.T) {
	p := m.drawIdle(t)
	m.run(t, p, verb{event: store.SpecUpdated, w: m.drawRecorded(t), image: rapid.SampledFrom(images).Draw(t, "image")})
}

func (m *model) start(t *rapid.T) {
	p := m.drawIdle(t)
	ev := rapid.SampledFrom([]store.EventType{store.StartRequested, store.ResumeRequested}).Draw(t, "verb")
	m.run(t, p, verb{event: ev, w: m.drawRecorded(t)})
}

func (m *model) restart(t *rapid.T) {
	p := m.drawIdle(t)
	m.run(t, p, verb{event: store.RestartRequested, w: m.drawRecorded(t)})
}

// suspend sets or clears a job's spec.suspend from outside gobrave, as
// kubectl patch or Kueue do.
func (m *model) suspend(t *rapid.T) {
	var jobs []workload
	for _, w := range workloads {
		if w.kind == runtimeid.KindJob && m.cluster.object(w) != nil {
			jobs = append(jobs, w)
		}
	}
	if len(jobs) == 0 {
		t.Skip("no job in the cluster")
	}
	w := rapid.SampledFrom(jobs).Draw(t, "job")
	on := rapid.Bool().Draw(t, "suspend")
	changed, err := m.cluster.suspend(w.name, on)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl patch %s suspend=%v (changed: %v): %s", w, on, changed, m.describe(w))
}

func (m *model) stop(t *rapid.T) {
	p := m.drawIdle(t)
	ev := rapid.SampledFrom([]store.EventType{store.StopRequested, store.PauseRequested}).Draw(t, "verb")
	m.run(t, p, verb{event: ev, w: m.drawRecorded(t)})
}

func (m *model) delete(t *rapid.T) {
	p := m.drawIdle(t)
	m.run(t, p, verb{event: store.DeleteRequested, w: m.drawRecorded(t)})
}

// run runs v in p, maybe pausing it at a step or failing one of its calls.
// A verb that returns without error, with no call failed and no pause,
// must have recorded at once what needed no waiting (see immediate).
func (m *model) run(t *rapid.T, p *process, v verb) {
	pauseAt := rapid.OneOf(rapid.Just(0), rapid.IntRange(1, 6)).Draw(t, "pauseAt")
	failAt := rapid.OneOf(rapid.Just(0), rapid.Just(0), rapid.Just(0), rapid.IntRange(1, 5)).Draw(t, "failAt")
	want := m.immediate(t, v)
	r := p.start(m.ctx, v.String(), pauseAt, failAt, m.verbFunc(p, v))
	res, paused, err := p.await(r)
	if err != nil {
		t.Fatal(err)
	}
	if paused {
		p.run = r
		t.Logf("%s: %s paused", p.name, v)
		return
	}
	m.logResult(t, p, v, res)
	if res.err != nil || p.failedCall() {
		return
	}
	if v.event == store.Created {
		m.checkCreated(t, v, res.w)
		return
	}
	if want != "" {
		got, err := m.obs.Get(m.ctx, v.w.id().String())
		if err != nil {
			t.Fatal(err)
		}
		if got.State != want {
			t.Fatalf("%s returned nil on a workload already %s, but left the record %s (want %s at once)", v, want, got.State, want)
		}
	}
}

func (m *model) logResult(t *rapid.T, p *process, v verb, res verbResult) {
	if res.err != nil {
		t.Logf("%s: %s: error: %v", p.name, v, res.err)
		return
	}
	t.Logf("%s: %s: ok, record %s uid %q epoch %d", p.name, v, res.w.State, res.w.UID, res.w.Epoch)
}

// verbFunc is v as the CLI does it: read the record, then apply the verb
// (or create).
func (m *model) verbFunc(p *process, v verb) func(context.Context) (store.Workload, error) {
	if v.event == store.Created {
		return func(ctx context.Context) (store.Workload, error) {
			s := spec.ContainerSpec{Name: v.w.name, Image: images[0], WorkloadKind: v.w.kind}
			if v.w.name == "web" {
				s.ExposedPort, s.ExposeService = 8080, true
			}
			w, _, err := p.eng.Create(ctx, runtimeid.RuntimeK8s, namespace, s)
			return w, err
		}
	}
	if v.event == store.SpecUpdated {
		return func(ctx context.Context) (store.Workload, error) {
			w, err := p.st.Get(ctx, v.w.id().String())
			if err != nil {
				return w, err
			}
			next := w.Spec
			next.Image = v.image
			res, err := p.eng.Update(ctx, w, next, "")
			if errors.Is(err, lifecycle.ErrNoChange) {
				return res.Workload, nil
			}
			if err == nil {
				m.mu.Lock()
				m.updated = append(m.updated, updated{runtimeID: w.RuntimeID, revision: res.Revision.Revision, image: v.image})
				m.mu.Unlock()
			}
			return res.Workload, err
		}
	}
	return func(ctx context.Context) (store.Workload, error) {
		w, err := p.st.Get(ctx, v.w.id().String())
		if err != nil {
			return w, err
		}
		res, err := p.eng.Apply(ctx, w, v.event)
		return res.Workload, err
	}
}

// immediate is the state a verb must leave the record in at once, read
// from the cluster before it runs: what is already true needs no waiting
// (a stop of a stopped workload, a start of a running one, a delete). ""
// when the verb has to wait for the controllers.
func (m *model) immediate(t *rapid.T, v verb) store.State {
	rec, err := m.obs.Get(m.ctx, v.w.id().String())
	if err != nil {
		return ""
	}
	evs, err := m.obs.Events(m.ctx, rec.RuntimeID)
	if err != nil {
		t.Fatal(err)
	}
	// The record is about the object: it names it, or it waits for a new
	// one and this one is not one it knew before.
	sameObject := func(uid string) bool {
		return rec.UID == uid || rec.UID == "" && !slices.ContainsFunc(evs, func(e store.Event) bool { return e.UID == uid })
	}
	switch v.event {
	case store.DeleteRequested:
		return store.StateDeleted
	case store.PauseRequested:
		if v.w.kind == runtimeid.KindDeployment {
			return m.immediate(t, verb{event: store.StopRequested, w: v.w})
		}
		// A job's pause is its suspension: paused at once when the job
		// controller has suspended it already.
		j := m.cluster.job(v.w.name)
		if j != nil && sameObject(string(j.UID)) && j.DeletionTimestamp == nil && !jobEnded(j) &&
			j.Spec.Suspend != nil && *j.Spec.Suspend && jobCondition(j, batchv1.JobSuspended) {
			return store.StatePaused
		}
	case store.StopRequested:
		if v.w.kind == runtimeid.KindDeployment {
			d := m.cluster.deployment(v.w.name)
			if d != nil && sameObject(string(d.UID)) && *d.Spec.Replicas == 0 &&
				d.Status.ObservedGeneration >= d.Generation && d.Status.Replicas == 0 {
				return store.StateExited
			}
			return ""
		}
		j := m.cluster.job(v.w.name)
		switch {
		case j == nil && rec.UID != "":
			return store.StateExited // the job is gone: stopped
		case j == nil:
			// The record waits for a new run (a start replacing the job
			// may be under way in another process): no verdict on an
			// absence, recover gives it.
		case !sameObject(string(j.UID)):
		case jobCondition(j, batchv1.JobComplete):
			return store.StateExited
		case jobCondition(j, batchv1.JobFailed):
			return store.StateFailed
		}
	case store.StartRequested, store.ResumeRequested:
		if v.w.kind == runtimeid.KindDeployment {
			d := m.cluster.deployment(v.w.name)
			if d != nil && sameObject(string(d.UID)) && d.DeletionTimestamp == nil && *d.Spec.Replicas == 1 &&
				d.Status.ObservedGeneration >= d.Generation && d.Status.ReadyReplicas > 0 {
				return store.StateRunning
			}
			return ""
		}
		j := m.cluster.job(v.w.name)
		if j != nil && sameObject(string(j.UID)) && j.DeletionTimestamp == nil && !jobEnded(j) &&
			j.Status.Ready != nil && *j.Status.Ready > 0 {
			return store.StateRunning
		}
	}
	return ""
}

func jobCondition(j *batchv1.Job, typ batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == typ && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// checkCreated: a create that returned nil recorded the object it made.
func (m *model) checkCreated(t *rapid.T, v verb, w store.Workload) {
	o := m.cluster.object(v.w)
	if o == nil {
		t.Fatalf("%s returned nil but there is no %s in the cluster", v, v.w)
	}
	if w.UID != string(o.GetUID()) || w.State != store.StateCreated {
		t.Fatalf("%s returned record state %s uid %q; the object is %s", v, w.State, w.UID, o.GetUID())
	}
}

// resume lets a paused verb go on.
func (m *model) resume(t *rapid.T) {
	p := m.drawPaused(t)
	again := rapid.OneOf(rapid.Just(0), rapid.IntRange(1, 3)).Draw(t, "pauseAgain")
	desc := p.run.desc
	res, paused, err := p.resume(again)
	if err != nil {
		t.Fatal(err)
	}
	if paused {
		t.Logf("%s: %s paused again", p.name, desc)
		return
	}
	if res.err != nil {
		t.Logf("%s: %s resumed: error: %v", p.name, desc, res.err)
		return
	}
	t.Logf("%s: %s resumed: ok, record %s uid %q epoch %d", p.name, desc, res.w.State, res.w.UID, res.w.Epoch)
}

// kill kills a paused process and starts another in its place.
func (m *model) kill(t *rapid.T) {
	p := m.drawPaused(t)
	reached := rapid.Bool().Draw(t, "callReachedServer")
	m.killProcess(t, p, reached)
}

func (m *model) killProcess(t *rapid.T, p *process, reached bool) {
	desc := p.run.desc
	if err := p.kill(reached); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: killed in %s (its call reached the server: %v)", p.name, desc, reached)
	np, err := m.newProcess()
	if err != nil {
		t.Fatal(err)
	}
	m.procs[slices.Index(m.procs, p)] = np
}

// concurrent runs two verbs of two processes at once, or a verb and a
// `recover --once` pass. Their interleaving is the scheduler's.
func (m *model) concurrent(t *rapid.T) {
	if os.Getenv("MODEL_NO_CONCURRENT") != "" {
		t.Skip("off")
	}
	var idle []*process
	for _, p := range m.procs {
		if p.run == nil {
			idle = append(idle, p)
		}
	}
	if len(idle) < 2 {
		t.Skip("fewer than two idle processes")
	}
	a := m.drawVerb(t, "first")
	withRecover := rapid.Bool().Draw(t, "withRecover")
	var b verb
	if !withRecover {
		b = m.drawVerb(t, "second")
	}
	ra := idle[0].start(m.ctx, a.String(), 0, 0, m.verbFunc(idle[0], a))
	var rb *verbRun
	recovered := make(chan error, 1)
	if withRecover {
		bulk := drawBulk(t)
		go func() { recovered <- m.recoverOnce(bulk) }()
	} else {
		rb = idle[1].start(m.ctx, b.String(), 0, 0, m.verbFunc(idle[1], b))
	}
	res, _, err := idle[0].await(ra)
	if err != nil {
		t.Fatal(err)
	}
	m.logResult(t, idle[0], a, res)
	if withRecover {
		if err := <-recovered; err != nil {
			t.Fatal(err)
		}
		t.Logf("recover --once ran alongside")
		return
	}
	res, _, err = idle[1].await(rb)
	if err != nil {
		t.Fatal(err)
	}
	m.logResult(t, idle[1], b, res)
}

// drawVerb draws any verb on any workload.
func (m *model) drawVerb(t *rapid.T, label string) verb {
	ev := rapid.SampledFrom([]store.EventType{
		store.Created, store.StartRequested, store.ResumeRequested, store.RestartRequested, store.StopRequested, store.PauseRequested, store.DeleteRequested,
		store.SpecUpdated,
	}).Draw(t, label+"Verb")
	v := verb{event: ev, w: rapid.SampledFrom(workloads).Draw(t, label+"Workload")}
	if ev == store.SpecUpdated {
		v.image = rapid.SampledFrom(images).Draw(t, label+"Image")
	}
	return v
}

// controller runs one controller step on one workload's object.
func (m *model) controller(t *rapid.T) {
	var live []workload
	for _, w := range workloads {
		if m.cluster.object(w) != nil {
			live = append(live, w)
		}
	}
	if len(live) == 0 {
		t.Skip("no object in the cluster")
	}
	w := rapid.SampledFrom(live).Draw(t, "object")
	opts := stepOptions{
		outcome: rapid.SampledFrom([]string{jobComplete, jobFailed}).Draw(t, "jobOutcome"),
		pod:     rapid.Bool().Draw(t, "failedPod"),
	}
	changed, err := m.cluster.step(w, true, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("controller step on %s (changed: %v): %s", w, changed, m.describe(w))
}

// recover runs one `recover --once` pass.
func (m *model) recover(t *rapid.T) {
	if err := m.recoverOnce(drawBulk(t)); err != nil {
		t.Fatal(err)
	}
	t.Logf("recover --once: %s", m.records(t))
}

// drawBulk draws how a `recover --once` pass heals the requests of dead
// processes: in bulk (Engine.RecoverAll, what recover does: one stream per
// namespace and kind) or one record at a time (Engine.Recover, a read by
// name each). Both must keep the record the truth.
func drawBulk(t *rapid.T) bool {
	return rapid.Bool().Draw(t, "recoverInBulk")
}

// recoverOnce is `recover --once` in a new process: the engine heals the
// requests of dead processes that never reached the cluster (bulk: with
// Engine.RecoverAll, else Engine.Recover per record), then a monitor
// reconciles every non-terminal record with the cluster, once.
func (m *model) recoverOnce(bulk bool) error {
	st, err := store.Open(m.ctx, m.path)
	if err != nil {
		return err
	}
	defer st.Close()
	m.monitors++
	owner := store.Owner{ID: fmt.Sprintf("%s/%d/recover-%d", m.host, os.Getpid(), m.monitors), PID: os.Getpid(), Host: m.host}
	e := &lifecycle.Engine{Store: st, Client: func(string) (kubernetes.Interface, error) { return m.cluster, nil }, Owner: owner}
	if bulk {
		if _, err := e.RecoverAll(m.ctx); err != nil {
			return err
		}
	} else {
		live, err := st.List(m.ctx, store.Filter{NoSpec: true})
		if err != nil {
			return err
		}
		deleted, err := st.UnconfirmedDeletes(m.ctx)
		if err != nil {
			return err
		}
		for _, w := range append(live, deleted...) {
			if _, _, err := e.Recover(m.ctx, w); err != nil {
				return err
			}
		}
	}
	ws, err := st.List(m.ctx, store.Filter{NoSpec: true})
	if err != nil || len(ws) == 0 {
		return err
	}
	mon := monitor.New(m.cluster, st, monitor.Options{Owner: owner, Once: true})
	for _, w := range ws {
		id, err := runtimeid.Parse(w.RuntimeID)
		if err != nil {
			return err
		}
		mon.Add(id)
	}
	_, err = mon.Run(m.ctx)
	return err
}

// quiesce settles the cluster and recovers, then checks that every record
// is the truth.
func (m *model) quiesce(t *rapid.T) {
	if m.anyPaused() {
		t.Skip("a verb is paused")
	}
	m.settle(t)
	m.checkTruth(t)
}

// finish ends the sequence: every paused verb is resumed or killed, then
// the sequence quiesces and is checked.
func (m *model) finish(t *rapid.T) {
	for _, p := range m.procs {
		for p.run != nil {
			if rapid.Bool().Draw(t, "finishByKill") {
				m.killProcess(t, p, rapid.Bool().Draw(t, "callReachedServer"))
				break
			}
			if _, _, err := p.resume(0); err != nil {
				t.Fatal(err)
			}
		}
	}
	m.quiesce(t)
}

// settle runs the controllers until nothing lags, then `recover --once`
// until a pass changes nothing.
func (m *model) settle(t *rapid.T) {
	if err := m.cluster.settle(); err != nil {
		t.Fatal(err)
	}
	prev := m.dbState(t)
	for i := 1; ; i++ {
		if err := m.recoverOnce(drawBulk(t)); err != nil {
			t.Fatal(err)
		}
		cur := m.dbState(t)
		if cur == prev {
			return
		}
		if i == maxRecoverPasses {
			t.Fatalf("recover --once still changed the records after %d passes:\n%s", i, cur)
		}
		prev = cur
	}
}

// --- invariants -------------------------------------------------------------

// check runs after every action: no record or event names an object that
// never existed.
func (m *model) check(t *rapid.T) {
	ws, err := m.obs.List(m.ctx, store.Filter{All: true, NoSpec: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		if w.UID != "" && !m.cluster.existed(w.UID) {
			t.Fatalf("%s refers to object %s, which never existed", w.RuntimeID, w.UID)
		}
	}
	evs, err := m.obs.Events(m.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.UID != "" && !m.cluster.existed(e.UID) {
			t.Fatalf("event %d %s of %s refers to object %s, which never existed", e.Seq, e.Type, e.RuntimeID, e.UID)
		}
	}
	m.checkRevisions(t, ws)
}

// checkRevisions: every record's revisions are numbered 1..N, the last one
// is the record's spec, and every update that returned nil still has its
// revision with its image, whatever was killed since.
func (m *model) checkRevisions(t *rapid.T, ws []store.Workload) {
	revs := map[string][]store.Revision{}
	for _, w := range ws {
		rs, err := m.obs.Revisions(m.ctx, w.RuntimeID)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range rs {
			if r.Revision != i+1 {
				t.Fatalf("%s: revision %d at position %d: the revisions are not 1..N", w.RuntimeID, r.Revision, i+1)
			}
		}
		rec, err := m.obs.Get(m.ctx, w.RuntimeID)
		if err != nil {
			t.Fatal(err)
		}
		if last := rs[len(rs)-1]; !store.SameSpec(last.Spec, rec.Spec) {
			t.Fatalf("%s: the last revision (%d, %s) is not the record's spec (%s)", w.RuntimeID, last.Revision, last.Spec.Image, rec.Spec.Image)
		}
		revs[w.RuntimeID] = rs
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, u := range m.updated {
		rs := revs[u.runtimeID]
		if u.revision > len(rs) || rs[u.revision-1].Spec.Image != u.image {
			t.Fatalf("%s: the update to %s returned revision %d, which is lost (%d revisions)", u.runtimeID, u.image, u.revision, len(rs))
		}
	}
}

// checkTruth checks a quiescent sequence: the cluster settled and recover
// changes nothing more.
//
//   - Every record is running, exited, failed or deleted (never created,
//     starting or stopping).
//   - A record whose object exists names its UID, and its state is the
//     object's: a deployment of 1 (ready) replica is running, of 0 exited; a
//     job running (its pod ready) is running, suspended paused, Complete
//     exited, Failed failed.
//   - A record whose object is gone is deleted, or, when its last request
//     was a stop of a job, exited (failed when that run had failed).
//   - Every object in the cluster has a record.
//   - Each observed event is recorded at most once per (runtime ID, UID,
//     type, epoch), and the epoch of a record is the number of its requested
//     events but RequestFailed (Created counts).
//   - The database passes its integrity check.
func (m *model) checkTruth(t *rapid.T) {
	ws, err := m.obs.List(m.ctx, store.Filter{All: true, NoSpec: true})
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[string]store.Workload{}
	for _, w := range ws {
		recorded[w.RuntimeID] = w
	}
	for _, wl := range workloads {
		w, ok := recorded[wl.id().String()]
		o := m.cluster.object(wl)
		switch {
		case !ok && o != nil:
			t.Fatalf("%s %s is in the cluster but not recorded", wl, o.GetUID())
		case !ok:
			continue
		}
		if w.State == store.StateCreated || w.State == store.StateStarting || w.State == store.StateStopping {
			t.Fatalf("%s is left %s (%s)", w.RuntimeID, w.State, m.describe(wl))
		}
		if o != nil && w.State == store.StateDeleted && os.Getenv("MODEL_TMP_EXEMPT_DELETE") != "" {
			continue
		}
		if o != nil {
			if w.UID != string(o.GetUID()) {
				t.Fatalf("%s records uid %q (%s) but the object is %s (%s)", w.RuntimeID, w.UID, w.State, o.GetUID(), m.describe(wl))
			}
			if want := m.truth(wl); w.State != want {
				t.Fatalf("%s is %s, but the object says %s (%s)", w.RuntimeID, w.State, want, m.describe(wl))
			}
			continue
		}
		evs, err := m.obs.Events(m.ctx, w.RuntimeID)
		if err != nil {
			t.Fatal(err)
		}
		eff := effectiveRequest(evs)
		want := m.gone(wl, w, eff)
		if !slices.Contains(want, w.State) {
			t.Fatalf("%s is %s (last request %s, %s not undone), but its object is gone: want %v", w.RuntimeID, w.State, w.Request, eff, want)
		}
	}
	m.checkEvents(t, ws)
	if err := m.obs.IntegrityCheck(m.ctx); err != nil {
		t.Fatal(err)
	}
}

// gone is what the record w of a workload whose object is gone may say: a
// deployment is deleted. A job is exited when stopped (its last request, or
// the last one no RequestFailed undid, eff, is a stop; a pause suspends a
// job and deletes nothing), else
// deleted; and it may keep how its run ended (exited when complete, failed
// when failed): a job whose run is over and whose object a request removed
// (a stop, or a start replacing it that then failed) still ran.
//
// Which request stands is read two ways, and either is accepted: the
// record's last request, and the last one no RequestFailed undid (a
// RequestFailed recorded after a later request undoes nothing, which the
// history alone cannot tell).
func (m *model) gone(wl workload, w store.Workload, eff store.EventType) []store.State {
	if wl.kind != runtimeid.KindJob {
		return []store.State{store.StateDeleted}
	}
	end := m.cluster.endOf(w.UID)
	var want []store.State
	for _, req := range []store.EventType{w.Request, eff} {
		if req == store.StopRequested {
			want = append(want, store.StateExited)
		} else {
			want = append(want, store.StateDeleted)
		}
	}
	if end == jobComplete {
		want = append(want, store.StateExited)
	}
	if end == jobFailed {
		want = append(want, store.StateFailed)
	}
	return want
}

// effectiveRequest is the last request in a history that no RequestFailed
// undid: a RequestFailed undoes the request recorded last before it.
func effectiveRequest(evs []store.Event) store.EventType {
	var reqs []store.EventType
	for _, e := range evs {
		switch {
		case e.Type.Observed():
		case e.Type == store.RequestFailed:
			if len(reqs) > 0 {
				reqs = reqs[:len(reqs)-1]
			}
		default:
			reqs = append(reqs, e.Type)
		}
	}
	if len(reqs) == 0 {
		return ""
	}
	return reqs[len(reqs)-1]
}

// truth is the state of w's object, settled.
func (m *model) truth(w workload) store.State {
	if w.kind == runtimeid.KindDeployment {
		if *m.cluster.deployment(w.name).Spec.Replicas == 0 {
			return store.StateExited
		}
		return store.StateRunning
	}
	j := m.cluster.job(w.name)
	switch {
	case jobCondition(j, batchv1.JobComplete):
		return store.StateExited
	case jobCondition(j, batchv1.JobFailed):
		return store.StateFailed
	case j.Spec.Suspend != nil && *j.Spec.Suspend:
		return store.StatePaused
	}
	return store.StateRunning
}

// checkEvents replays each record's history: the epoch of an event is the
// number of requested events but RequestFailed up to it. A suspension, and
// a start after one, may repeat within an epoch (a job suspended and
// unsuspended again), but a suspension is never recorded twice in a row.
func (m *model) checkEvents(t *rapid.T, ws []store.Workload) {
	type key struct {
		uid   string
		typ   store.EventType
		epoch int
	}
	for _, w := range ws {
		evs, err := m.obs.Events(m.ctx, w.RuntimeID)
		if err != nil {
			t.Fatal(err)
		}
		epoch := 0
		seen := map[key]int64{}
		var lastObserved store.EventType
		for _, e := range evs {
			if !e.Type.Observed() {
				if e.Type != store.RequestFailed {
					epoch++
				}
				lastObserved = ""
				continue
			}
			prev := lastObserved
			lastObserved = e.Type
			if e.Type == store.ContainerPaused {
				if prev == store.ContainerPaused {
					t.Fatalf("%s: ContainerPaused twice in a row (event %d)", w.RuntimeID, e.Seq)
				}
				continue
			}
			if e.Type == store.ContainerStarted && prev == store.ContainerPaused {
				continue // out of paused: not deduplicated by the index
			}
			k := key{e.UID, e.Type, epoch}
			if s, dup := seen[k]; dup {
				t.Fatalf("%s: %s of %s recorded twice in epoch %d (events %d and %d)", w.RuntimeID, e.Type, e.UID, epoch, s, e.Seq)
			}
			seen[k] = e.Seq
		}
		if epoch != w.Epoch {
			t.Fatalf("%s is at epoch %d but has %d requested events (but RequestFailed)", w.RuntimeID, w.Epoch, epoch)
		}
	}
}

// --- helpers ----------------------------------------------------------------

func (m *model) anyPaused() bool {
	return slices.ContainsFunc(m.procs, func(p *process) bool { return p.run != nil })
}

// drawIdle draws a process with no verb in flight; none: the action is
// skipped.
func (m *model) drawIdle(t *rapid.T) *process {
	var idle []*process
	for _, p := range m.procs {
		if p.run == nil {
			idle = append(idle, p)
		}
	}
	if len(idle) == 0 {
		t.Skip("every process is paused")
	}
	return idle[rapid.IntRange(0, len(idle)-1).Draw(t, "process")]
}

func (m *model) drawPaused(t *rapid.T) *process {
	var paused []*process
	for _, p := range m.procs {
		if p.run != nil {
			paused = append(paused, p)
		}
	}
	if len(paused) == 0 {
		t.Skip("no verb is paused")
	}
	return paused[rapid.IntRange(0, len(paused)-1).Draw(t, "paused")]
}

// drawRecorded draws a workload with a record.
func (m *model) drawRecorded(t *rapid.T) workload {
	var rec []workload
	for _, w := range workloads {
		if _, err := m.obs.Get(m.ctx, w.id().String()); err == nil {
			rec = append(rec, w)
		} else if !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
	}
	if len(rec) == 0 {
		t.Skip("nothing recorded")
	}
	return rapid.SampledFrom(rec).Draw(t, "workload")
}

// dbState is what recover may change: every record's state, UID, epoch and
// message, and the last event.
func (m *model) dbState(t *rapid.T) string {
	seq, err := m.obs.LastEventSeq(m.ctx)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("last event %d; %s", seq, m.records(t))
}

func (m *model) records(t *rapid.T) string {
	ws, err := m.obs.List(m.ctx, store.Filter{All: true, NoSpec: true})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, w := range ws {
		out = append(out, fmt.Sprintf("%s/%s %s uid %q epoch %d (%s)", w.Kind, w.Name, w.State, w.UID, w.Epoch, w.Message))
	}
	return strings.Join(out, "; ")
}

// describe says what the cluster holds for w.
func (m *model) describe(w workload) string {
	if w.kind == runtimeid.KindDeployment {
		d := m.cluster.deployment(w.name)
		if d == nil {
			return "no deployment"
		}
		return "deployment " + describeDeployment(d)
	}
	j := m.cluster.job(w.name)
	if j == nil {
		return "no job"
	}
	st := j.Status
	ready := int32(0)
	if st.Ready != nil {
		ready = *st.Ready
	}
	var conds []string
	for _, c := range st.Conditions {
		if c.Status == corev1.ConditionTrue {
			conds = append(conds, string(c.Type))
		}
	}
	return fmt.Sprintf("job %s active %d ready %d conditions %v deleting %v", j.UID, st.Active, ready, conds, j.DeletionTimestamp != nil)
}

func describeDeployment(d *appsv1.Deployment) string {
	return fmt.Sprintf("%s replicas %d generation %d observed %d status replicas %d ready %d deleting %v",
		d.UID, *d.Spec.Replicas, d.Generation, d.Status.ObservedGeneration, d.Status.Replicas, d.Status.ReadyReplicas, d.DeletionTimestamp != nil)
}
