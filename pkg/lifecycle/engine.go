// Package lifecycle applies gobrave's verbs to runtime IDs so that the state
// database is always the truth: the intent is recorded first, as a requested
// event that raises the record's epoch; then the cluster is changed through
// the workload's kind; a failed action records a compensating RequestFailed
// that puts the state back; and a read of the object confirms at once what
// needs no waiting (a stop of a stopped workload, a start of a running one).
//
// A crash between any two steps leaves a record that is at worst in a
// transitional state (created, starting, stopping) with its lease free, so
// the next monitor or `recover` observes the object and records what is true.
// The package knows no cobra and no flags.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"

	"github.com/gobrave/kubectl-gobrave/pkg/runtime"
	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/spec"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// LeaseTTL is how long the engine's lease on an ID lives while it acts, so
// that no monitor judges an object it is about to create as missing.
const LeaseTTL = 15 * time.Second

// DefaultLockWait is how long the CLI's verbs wait for another command
// changing the same ID (Engine.LockWait).
const DefaultLockWait = 30 * time.Second

// Engine applies verbs to records.
type Engine struct {
	Store *store.Store
	// Client returns the clientset of the cluster of a runtime name.
	Client func(runtime string) (kubernetes.Interface, error)
	// Owner identifies this process in the leases.
	Owner store.Owner
	// Now returns the current time (tests replace it); nil is time.Now.
	Now func() time.Time
	// LockWait is how long a verb waits while another command changes the
	// same ID before it fails with ErrBusy; 0 fails at once.
	LockWait time.Duration
	// Cluster returns the identity of the cluster a runtime name points at
	// now (its API server and CA); nil, or "", when it cannot be told, and
	// then no cluster is checked or recorded.
	Cluster func(runtime string) (string, error)
	// SyncTimeout bounds RecoverAll's wait for the next object of a
	// stream; 0 is monitor.DefaultSyncTimeout.
	SyncTimeout time.Duration
}

// ErrOtherCluster is wrapped when a verb would act on a cluster other than
// the one the record's workload was made on.
var ErrOtherCluster = errors.New("the current context points at another cluster")

// clusters returns the cluster id's record was made on ("" when unknown)
// and the one its runtime points at now ("" when it cannot be told).
func (e *Engine) clusters(ctx context.Context, id runtimeid.ID) (rec, cur string, err error) {
	if e.Cluster == nil {
		return "", "", nil
	}
	if cur, err = e.Cluster(id.Runtime); err != nil || cur == "" {
		return "", "", err
	}
	rec, err = e.Store.Cluster(ctx, id.String())
	return rec, cur, err
}

// checkCluster refuses a verb on id when the record's workload lives on
// another cluster than runtime points at now, before anything is read or
// recorded: the absence of its object there says nothing about it. A record
// with no cluster yet (made before clusters were recorded) learns this one.
func (e *Engine) checkCluster(ctx context.Context, id runtimeid.ID, verb string) error {
	rec, cur, err := e.clusters(ctx, id)
	switch {
	case err != nil || cur == "":
		return err
	case rec == "":
		return e.Store.SetCluster(ctx, id.String(), cur)
	case rec != cur:
		return fmt.Errorf("%s %s: %w: the workload was made on %s, runtime %s now points at %s (switch back with --context or the runtime's profile, or adopt the workload on this cluster with 'kubectl gobrave adopt -n %s')",
			verb, id, ErrOtherCluster, rec, id.Runtime, cur, id.Namespace)
	}
	return nil
}

// ErrDeleted is returned when a verb cannot apply to a deleted record.
var ErrDeleted = errors.New("it was deleted")

// Result is what Apply did.
type Result struct {
	// Workload is the record afterwards.
	Workload store.Workload
	// Gone is true when the object was not in the cluster.
	Gone bool
}

// Apply applies verb (StartRequested, ResumeRequested, RestartRequested,
// StopRequested, PauseRequested or DeleteRequested) to the record w.
func (e *Engine) Apply(ctx context.Context, w store.Workload, verb store.EventType) (Result, error) {
	id, err := runtimeid.Parse(w.RuntimeID)
	if err != nil {
		return Result{Workload: w}, err
	}
	k, err := runtime.KindOf(id.Kind)
	if err != nil {
		return Result{Workload: w}, err
	}
	client, err := e.Client(id.Runtime)
	if err != nil {
		return Result{Workload: w}, err
	}
	name := verbName(verb)
	if !isVerb(verb) {
		return Result{Workload: w}, fmt.Errorf("%s %s: not a lifecycle verb", verb, id)
	}

	// One verb of an ID at a time, in every process; then the record as
	// it is now, not as the caller read it before waiting.
	unlock, err := e.lock(ctx, w.RuntimeID)
	if err != nil {
		return Result{Workload: w}, fmt.Errorf("%s %s: %w", name, id, err)
	}
	defer unlock()
	if w, err = e.Store.Get(ctx, w.RuntimeID); err != nil {
		return Result{Workload: w}, err
	}
	if err := e.checkCluster(ctx, id, name); err != nil {
		return Result{Workload: w}, err
	}

	// Read-only checks and plans: nothing recorded, nothing changed. The
	// object is read first, so that a server that cannot be reached (or
	// refuses) leaves the database as it was.
	if verb == store.StopRequested || verb == store.PauseRequested {
		if w.State == store.StateDeleted {
			return Result{Workload: w}, fmt.Errorf("%s %s: %w (create it again with 'kubectl gobrave create')", name, id, ErrDeleted)
		}
	}
	obj, err := k.Get(ctx, client, id.Namespace, id.Name)
	gone := apierrors.IsNotFound(err)
	switch {
	case gone:
		obj = nil
	case err != nil:
		return Result{Workload: w}, fmt.Errorf("%s %s: %w", name, id, err)
	}
	// The object read is the one acted on: stop, pause and delete carry its
	// UID as a precondition, so one replaced in between is left alone.
	var readUID types.UID
	if obj != nil {
		readUID = obj.GetUID()
	}
	if obj != nil && w.UID != "" && string(obj.GetUID()) != w.UID {
		// Not the recorded object: someone else's of the same name. Leave it
		// alone; the recorded one is gone.
		cur := e.observeGone(ctx, w)
		return Result{Workload: cur, Gone: true}, fmt.Errorf("%s %s: the %s named %s in the cluster is another object (uid %s, recorded %s), left alone; the record is now %s (take the object over with 'kubectl gobrave adopt -n %s')",
			name, id, id.Kind, id.Name, obj.GetUID(), w.UID, cur.State, id.Namespace)
	}
	expect := k.StopExpect()
	if verb == store.PauseRequested {
		expect = k.PauseExpect()
	}
	if gone && verb != store.DeleteRequested && expect != store.ContainerDeleted {
		// A kind whose stop is not a deletion can neither stop nor start
		// what is gone, nor can a pause that is not a deletion pause it:
		// record what the read found, and say so.
		cur := e.observeGone(ctx, w)
		return Result{Workload: cur, Gone: true}, fmt.Errorf("%s %s: the %s no longer exists in the cluster (recorded as %s; create it again with 'kubectl gobrave create')", name, id, id.Kind, cur.State)
	}
	t := store.Transition{RuntimeID: w.RuntimeID, Type: verb}
	var plan runtime.StartPlan
	switch verb {
	case store.StartRequested, store.ResumeRequested, store.RestartRequested:
		if verb == store.RestartRequested {
			plan, err = k.PlanRestart(id, obj)
		} else {
			plan, err = k.PlanStart(id, obj)
		}
		if err != nil {
			return Result{Workload: w}, err
		}
		t.Message, t.Retire = plan.Message, plan.Replace
		if !plan.Replace {
			t.UID = plan.UID
		}
	case store.StopRequested:
		t.Expect = k.StopExpect()
		t.Message = k.StopAction()
	case store.PauseRequested:
		t.Expect = k.PauseExpect()
		t.Message = k.PauseAction()
	case store.DeleteRequested:
		t.Message = "delete"
	default:
		return Result{Workload: w}, fmt.Errorf("%s %s: not a lifecycle verb", verb, id)
	}

	// 1. The intent, with a new epoch.
	intent, err := e.record(ctx, t)
	if err != nil {
		return Result{Workload: w}, fmt.Errorf("record %s of %s: %w", name, id, err)
	}
	epoch := intent.Epoch

	// 2. The action. An interrupt from here on still records the outcome.
	var (
		found = true
		uid   string
	)
	switch verb {
	case store.StartRequested, store.ResumeRequested, store.RestartRequested:
		var sp *spec.ContainerSpec
		if w.Spec.Image != "" {
			s := w.Spec
			sp = &s
		}
		var res runtime.StartResult
		res, err = k.Start(ctx, client, id, plan, sp)
		uid = res.UID
	case store.StopRequested:
		found, err = k.Stop(ctx, client, id, readUID)
	case store.PauseRequested:
		found, err = k.Pause(ctx, client, id, readUID)
	case store.DeleteRequested:
		found, err = k.Delete(ctx, client, id, readUID)
	}
	dbCtx := context.WithoutCancel(ctx)
	if err != nil {
		// 3a. Compensate: the request did not happen. When its outcome is
		// unknown (interrupted, timed out, the connection broke) the record
		// stays in its transitional state for a monitor to settle.
		ft := store.Transition{RuntimeID: w.RuntimeID, Type: store.RequestFailed, Epoch: epoch, Message: err.Error(),
			Restore: w.State, RestoreRequest: w.Request, RestoreExpect: w.Expect}
		if outcomeUnknown(ctx, err) {
			ft.Restore = ""
			ft.Message = "outcome unknown (" + err.Error() + "): the next monitor or 'kubectl gobrave recover --once' records what happened"
		}
		if t.Retire {
			ft.UID = w.UID
		}
		if _, rerr := e.record(dbCtx, ft); rerr != nil {
			err = errors.Join(err, fmt.Errorf("record the failure of %s of %s: %w", name, id, rerr))
		}
		cur, _ := e.Store.Get(dbCtx, w.RuntimeID)
		return Result{Workload: cur}, err
	}
	if uid != "" && (t.Retire || intent.UID == "") {
		if _, err := e.Store.SetObjectUID(dbCtx, w.RuntimeID, epoch, uid, ""); err != nil {
			return Result{Workload: intent}, err
		}
	}

	// 3b. Confirm what a read can tell at once.
	e.confirm(dbCtx, client, k, id, epoch)
	cur, err := e.Store.Get(dbCtx, w.RuntimeID)
	if err != nil {
		return Result{Workload: intent}, err
	}
	return Result{Workload: cur, Gone: !found}, nil
}

// observeGone records that w's object is not in the cluster, as a monitor
// would, and returns the record.
func (e *Engine) observeGone(ctx context.Context, w store.Workload) store.Workload {
	dbCtx := context.WithoutCancel(ctx)
	_, _, _ = e.Store.Apply(dbCtx, store.Transition{RuntimeID: w.RuntimeID, Type: store.ContainerDeleted, UID: w.UID, Epoch: w.Epoch,
		Message: "not found in the cluster"})
	if cur, err := e.Store.Get(dbCtx, w.RuntimeID); err == nil {
		return cur
	}
	return w
}

// confirm reads the object once and records what its status says under the
// request's epoch: a stop of a stopped deployment is exited at once, a start
// of a running one running. Errors are left to the monitors.
func (e *Engine) confirm(ctx context.Context, c kubernetes.Interface, k runtime.Kind, id runtimeid.ID, epoch int) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	obj, err := k.Get(ctx, c, id.Namespace, id.Name)
	var o runtime.Observation
	switch {
	case apierrors.IsNotFound(err):
		cur, gerr := e.Store.Get(ctx, id.String())
		if gerr != nil || cur.UID == "" {
			return // a new object is expected: no verdict on its absence
		}
		o = runtime.Deleted("")
		o.UID = cur.UID
	case err != nil:
		return
	default:
		var ok bool
		if o, ok = k.Observe(obj); !ok {
			if cur, gerr := e.Store.Get(ctx, id.String()); gerr == nil && cur.UID == "" && cur.Epoch == epoch {
				// The object a request made: remember it, as a monitor would.
				_, _ = e.Store.SetObjectUID(ctx, id.String(), epoch, string(obj.GetUID()), "")
			}
			return
		}
	}
	_, _, _ = e.Store.Apply(ctx, store.Transition{RuntimeID: id.String(), Type: o.Type, Message: o.Message, UID: o.UID, Epoch: epoch, Result: o.Result})
}

// Recover heals the record w when the process that recorded its last
// request died before the request reached the cluster. The monitors cannot
// tell: they observe objects, and such an object shows no sign of the
// request, so the record would stay as the intent left it. Recover reads
// the object once and, when the request never took effect, records
// RequestFailed for the record's epoch with the state and the UID the object
// shows, as the process would have had its API call failed:
//
//   - a stop (stopping) of a workload that still runs, or that is suspended
//     when the stop would have deleted it;
//   - a delete (deleted, no ContainerDeleted since) of an object that is not
//     being deleted;
//   - a create, or a start that replaces a finished job, that never made its
//     new object (no UID yet, and the object of the name is one the record
//     knew before).
//
// A deletion it finds done is confirmed with ContainerDeleted, so the record
// is not read again. Whatever a request did do is left to the monitors. It
// takes the ID's verb lock first: an ID whose verb a live process is
// carrying out is left alone. It returns the event it recorded, if any.
//
// Recover reads w's object by name: one request per record. RecoverAll
// heals every such record with what one stream per namespace and kind
// shows instead, and records the same.
func (e *Engine) Recover(ctx context.Context, w store.Workload) (store.Event, bool, error) {
	if !recoverable(w) {
		return store.Event{}, false, nil
	}
	id, err := runtimeid.Parse(w.RuntimeID)
	if err != nil {
		return store.Event{}, false, err
	}
	k, err := runtime.KindOf(id.Kind)
	if err != nil {
		return store.Event{}, false, err
	}
	client, err := e.Client(id.Runtime)
	if err != nil {
		return store.Event{}, false, err
	}
	if e.Owner.ID == "" {
		return store.Event{}, false, fmt.Errorf("recover %s: the engine has no lease owner", id)
	}
	key := verbLockPrefix + w.RuntimeID
	got, err := e.Store.AcquireLeases(ctx, e.Owner, []string{key}, LeaseTTL)
	if err != nil || len(got) == 0 {
		return store.Event{}, false, err // a verb of a live process is under way
	}
	defer func() { _ = e.Store.ReleaseLeases(context.WithoutCancel(ctx), e.Owner, key) }()
	// Read again under the lock: the record may have moved on.
	if w, err = e.Store.Get(ctx, w.RuntimeID); err != nil || !recoverable(w) {
		return store.Event{}, false, err
	}
	if rec, cur, err := e.clusters(ctx, id); err != nil || (rec != "" && cur != "" && rec != cur) {
		return store.Event{}, false, err // another cluster's: nothing here says anything about it
	}

	obj, err := k.Get(ctx, client, id.Namespace, id.Name)
	switch {
	case apierrors.IsNotFound(err):
		obj = nil
	case err != nil:
		return store.Event{}, false, fmt.Errorf("recover %s: %w", id, err)
	}
	s := sightingOf(k, obj)
	older := false
	if s.needsHistory(w) {
		evs, err := e.Store.Events(ctx, w.RuntimeID)
		if err != nil {
			return store.Event{}, false, err
		}
		older = slices.ContainsFunc(evs, func(ev store.Event) bool { return ev.UID == s.uid })
	}
	t, ok := healing(k, id, w, s, older)
	if !ok {
		return store.Event{}, false, nil
	}
	as, err := e.Store.ApplyBatchNoSpecs(ctx, []store.Transition{t}) // the record is not returned
	if err != nil {
		return store.Event{}, false, err
	}
	return as[0].Event, as[0].Applied, nil
}

// recoverable reports whether Recover may have something to heal in w.
func recoverable(w store.Workload) bool {
	switch w.State {
	case store.StateStopping, store.StateDeleted:
		return true
	case store.StateCreated, store.StateStarting:
		return w.UID == ""
	}
	return false
}

// record applies one transition and returns the record after it.
func (e *Engine) record(ctx context.Context, t store.Transition) (store.Workload, error) {
	as, err := e.Store.ApplyBatch(ctx, []store.Transition{t})
	if err != nil {
		return store.Workload{}, err
	}
	return as[0].Workload, nil
}

// ErrBusy is returned when another command is changing the same ID and did
// not finish within Engine.LockWait.
var ErrBusy = errors.New("another command is changing it now")

// lockPoll is how often a verb looks whether the ID's verb lock is free.
const lockPoll = 50 * time.Millisecond

// lock serializes the verbs of one ID across processes: it takes the ID's
// verb lock (a lease of its own key), waiting at most e.LockWait while
// another live command holds it, then the ID's lease when free (see lease).
// Both are renewed while the verb runs (a job start may wait for the old
// job longer than a lease lives) and released by unlock. Without the lock
// two verbs interleave: the intent of one, the other's whole request, then
// the first one's API call, which the record, owned by the later request,
// never learns about (a delete that removes a deployment after a later
// stop was recorded, and the record stays exited). A process that dies
// leaves its lock to the next command: its PID is gone.
func (e *Engine) lock(ctx context.Context, id string) (unlock func(), err error) {
	if e.Owner.ID == "" {
		return func() {}, nil
	}
	key := verbLockPrefix + id
	deadline := time.Now().Add(e.LockWait)
	for {
		got, err := e.Store.AcquireLeases(ctx, e.Owner, []string{key}, LeaseTTL)
		if err != nil {
			return nil, err
		}
		if len(got) == 1 {
			break
		}
		if !time.Now().Before(deadline) {
			return nil, fmt.Errorf("%w (waited %s): try again when it is done", ErrBusy, e.LockWait)
		}
		timer := time.NewTimer(lockPoll)
		select {
		case <-ctx.Done():
			timer.Stop()
			_ = e.Store.ReleaseLeases(context.WithoutCancel(ctx), e.Owner, key)
			return nil, ctx.Err()
		case <-timer.C:
		}
	}
	release := e.lease(ctx, id)
	stopRenew := e.renewLeases(ctx)
	return func() {
		stopRenew()
		release()
		_ = e.Store.ReleaseLeases(context.WithoutCancel(ctx), e.Owner, key)
	}, nil
}

// renewLeases renews every lease of e.Owner each third of LeaseTTL until
// the returned func is called (which waits for the renewing goroutine).
func (e *Engine) renewLeases(ctx context.Context) (stop func()) {
	renewCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(LeaseTTL / 3)
		defer tick.Stop()
		for {
			select {
			case <-renewCtx.Done():
				return
			case <-tick.C:
				_ = e.Store.RenewLeases(renewCtx, e.Owner)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// verbLockPrefix makes the key of an ID's verb lock in the leases table.
const verbLockPrefix = "verb:"

// lease takes the ID's lease while the engine acts, when it is free, so that
// a monitor of another process follows the ID instead of judging an object
// that is being made. A lease held by a live monitor is left to it: its
// observations are about real objects, and the store's epochs and retired
// UIDs sort them out.
func (e *Engine) lease(ctx context.Context, id string) (release func()) {
	if e.Owner.ID == "" {
		return func() {}
	}
	got, err := e.Store.AcquireLeases(ctx, e.Owner, []string{id}, LeaseTTL)
	if err != nil || len(got) == 0 {
		return func() {}
	}
	return func() {
		_ = e.Store.ReleaseLeases(context.WithoutCancel(ctx), e.Owner, id)
	}
}

// Create records the intent to create s in namespace of runtime rt, then
// creates its objects. A failed create leaves neither objects nor a record:
// a new ID is forgotten, a known one (deleted before) is put back as it was
// with a RequestFailed event. Invalid specs are errors before anything is
// recorded.
func (e *Engine) Create(ctx context.Context, rt string, namespace string, s spec.ContainerSpec) (store.Workload, runtime.Created, error) {
	client, err := e.Client(rt)
	if err != nil {
		return store.Workload{}, runtime.Created{}, err
	}
	r := runtime.New(client, rt)
	id, k, err := r.Prepare(&s, namespace)
	if err != nil {
		return store.Workload{}, runtime.Created{}, err
	}
	objs, err := runtime.Build(s, namespace)
	if err != nil {
		return store.Workload{}, runtime.Created{}, err
	}
	s.RuntimeNamespace = namespace
	unlock, err := e.lock(ctx, id.String())
	if err != nil {
		return store.Workload{}, runtime.Created{}, fmt.Errorf("create %s: %w", id, err)
	}
	defer unlock()
	old, err := e.Store.Get(ctx, id.String())
	known := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return store.Workload{}, runtime.Created{}, err
	}
	if known && !old.State.Terminal() {
		return store.Workload{}, runtime.Created{}, fmt.Errorf("%w: %s is already recorded (state %s): choose another name, or remove it first with 'kubectl gobrave delete %s'",
			spec.ErrInvalid, id, old.State, id.Kind+"/"+id.Name)
	}

	// Read first: an unreachable server, or an object of that name made
	// outside gobrave, leaves the database as it was.
	if _, err := k.Get(ctx, client, namespace, id.Name); err == nil {
		return store.Workload{}, runtime.Created{}, fmt.Errorf("create %s %q in namespace %q: it already exists (choose another name, or remove it with 'kubectl gobrave delete' or kubectl)", id.Kind, id.Name, namespace)
	} else if !apierrors.IsNotFound(err) {
		return store.Workload{}, runtime.Created{}, fmt.Errorf("create %s %q in namespace %q: %w", id.Kind, id.Name, namespace, err)
	}
	// Pod Security admission judges pods, not their templates: ask the
	// server about a pod of the template before anything is recorded.
	if err := runtime.CheckPods(ctx, client, namespace, s, objs, id.Kind); err != nil {
		return store.Workload{}, runtime.Created{}, err
	}
	what, svc := k.Resource()+"/"+id.Name, ""
	if objs.Service != nil {
		svc = ", service/" + objs.Service.Name
	}
	msg := "create " + what + svc
	now := e.now()
	w := store.Workload{
		RuntimeID: id.String(), Runtime: rt, Namespace: namespace, Kind: id.Kind, Name: s.Name,
		Spec: s, State: store.StateCreated, CreatedAt: now, UpdatedAt: now,
	}
	if err := e.Store.Put(ctx, w, store.Transition{RuntimeID: w.RuntimeID, Type: store.Created, Message: msg, Time: now}); err != nil {
		return store.Workload{}, runtime.Created{}, fmt.Errorf("record %s: %w", w.RuntimeID, err)
	}
	intent, err := e.Store.Get(ctx, w.RuntimeID)
	if err != nil {
		return store.Workload{}, runtime.Created{}, err
	}
	if e.Cluster != nil {
		// Under the lease, before the object exists. A record left without
		// its cluster (a crash in between, or this write failing with the
		// database, which the next write reports) learns it at its next verb.
		if cluster, err := e.Cluster(rt); err == nil && cluster != "" {
			_ = e.Store.SetCluster(ctx, w.RuntimeID, cluster)
		}
	}

	created, err := k.Create(ctx, client, namespace, objs)
	dbCtx := context.WithoutCancel(ctx)
	if err != nil {
		var cerr error
		if known {
			cerr = e.Store.Restore(dbCtx, old, intent.Epoch, "create failed: "+err.Error())
		} else {
			cerr = e.Store.Forget(dbCtx, w.RuntimeID, intent.Epoch)
		}
		if cerr != nil && !errors.Is(cerr, store.ErrSuperseded) {
			err = errors.Join(err, fmt.Errorf("undo the record of %s: %w", w.RuntimeID, cerr))
		}
		return store.Workload{}, runtime.Created{}, err
	}
	created.ID = id
	if _, err := e.Store.SetObjectUID(dbCtx, w.RuntimeID, intent.Epoch, created.UID, what+" created"+svc); err != nil {
		return store.Workload{}, created, err
	}
	cur, err := e.Store.Get(dbCtx, w.RuntimeID)
	return cur, created, err
}

func (e *Engine) now() time.Time {
	if e.Now != nil {
		return e.Now().UTC()
	}
	return time.Now().UTC()
}

// outcomeUnknown reports whether err leaves open whether the API server
// carried out the request: only a definite refusal (a 4xx status other than
// timeout and throttling) says it did not.
func outcomeUnknown(ctx context.Context, err error) bool {
	if errors.Is(err, runtime.ErrNotCreated) {
		return false // the kind knows it stopped short
	}
	if ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return code < 400 || code >= 500 || code == 408 || code == 429
	}
	var ne net.Error
	return errors.As(err, &ne) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err)
}

func isVerb(t store.EventType) bool {
	switch t {
	case store.StartRequested, store.ResumeRequested, store.RestartRequested, store.StopRequested, store.PauseRequested, store.DeleteRequested:
		return true
	}
	return false
}

func verbName(t store.EventType) string {
	switch t {
	case store.Created:
		return "create"
	case store.StartRequested:
		return "start"
	case store.ResumeRequested:
		return "resume"
	case store.RestartRequested:
		return "restart"
	case store.StopRequested:
		return "stop"
	case store.PauseRequested:
		return "pause"
	case store.DeleteRequested:
		return "delete"
	}
	return string(t)
}
