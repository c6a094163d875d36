package lifecycle

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gobrave/kubectl-gobrave/pkg/monitor"
	"github.com/gobrave/kubectl-gobrave/pkg/runtime"
	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// sighting is what one read of the cluster showed of a record's object.
type sighting struct {
	found    bool   // an object of the name is there
	uid      string // its UID
	deleting bool   // its deletion is under way
	obs      runtime.Observation
	definite bool // obs says something (Kind.Observe)
}

// sightingOf is what obj (nil: not in the cluster) shows.
func sightingOf(k runtime.Kind, obj metav1.Object) sighting {
	if obj == nil {
		return sighting{}
	}
	o, ok := k.Observe(obj)
	return sighting{found: true, uid: string(obj.GetUID()), deleting: obj.GetDeletionTimestamp() != nil, obs: o, definite: ok}
}

// needsHistory reports whether healing w needs to know whether its record
// knew s's object before (a request that makes a new object, waiting for
// it with no UID, while an object of the name is there).
func (s sighting) needsHistory(w store.Workload) bool {
	return s.found && s.definite && !s.deleting && w.UID == ""
}

// healing is the transition that heals w, a record of id whose last request
// a dead process may have left unsent, when its object shows s (see
// Recover); older says whether the record knew s's object before the
// request (needsHistory). ok is false when there is nothing to heal.
func healing(k runtime.Kind, id runtimeid.ID, w store.Workload, s sighting, older bool) (t store.Transition, ok bool) {
	if !s.found {
		if w.State != store.StateDeleted {
			return store.Transition{}, false // the monitors record the absence
		}
		return store.Transition{RuntimeID: w.RuntimeID, Type: store.ContainerDeleted, UID: w.UID, Epoch: w.Epoch}, true
	}
	if !s.definite || s.deleting {
		return store.Transition{}, false // nothing definite, or a deletion under way
	}
	o := s.obs
	what := k.Resource() + "/" + id.Name
	msg := fmt.Sprintf("the %s did not reach the cluster: the process that recorded it ended first", verbName(w.Request))
	switch {
	case w.UID == "" && older:
		msg = "the new " + what + " was never made: the process making it ended first"
	case w.UID != "" && w.UID != s.uid:
		return store.Transition{}, false // another object took the name
	case w.State == store.StateDeleted:
		// Its object is still there and not being deleted.
	case w.State == store.StateStopping && o.Type == store.ContainerStarted:
		// Its object still runs.
	case w.State == store.StateStopping && o.Type == store.ContainerPaused && w.Expect != store.ContainerPaused:
		// Its object is suspended, and not by this request (a stop that
		// would delete it): the suspension is the truth.
	default:
		return store.Transition{}, false // what the request did, the monitors record
	}
	state := map[store.EventType]store.State{
		store.ContainerStarted: store.StateRunning, store.ContainerExited: store.StateExited, store.ContainerFailed: store.StateFailed,
		store.ContainerPaused: store.StatePaused,
	}[o.Type]
	return store.Transition{
		RuntimeID: w.RuntimeID, Type: store.RequestFailed, Epoch: w.Epoch, Restore: state, UID: s.uid,
		Message: fmt.Sprintf("%s; %s is %s", msg, what, state),
	}, true
}

// recoverPage is how many records RecoverAll reads at a time while it
// looks for those a dead process may have left wrong.
const recoverPage = 500

// RecoverAll heals, as Recover does one record, every record a dead process
// may have left wrong: the non-terminal ones in a request and the deleted
// ones whose deletion is not confirmed. It makes no request per record:
// the records are grouped by runtime and kind, and for each group
//
//  1. the verb locks of its records are taken in one transaction (a record
//     whose lock a live process holds is left to that process) and renewed
//     while the group is read; the records are read again under them, and
//     those made on another cluster than the runtime's now are left alone;
//  2. the kind's objects are streamed once per namespace of the group (one
//     request for all namespaces above monitor.DefaultClusterWide; see
//     monitor.StreamObjects), whatever their labels, keeping only what the
//     objects of the group's names show: a name not streamed is not in the
//     cluster, as a read by name would have found;
//  3. the transitions Recover would record are recorded in one batch, and
//     the locks released.
//
// Each object is read after its record's lock was taken, as Recover reads
// it, so a request of a live process is never judged half-done. It returns
// the events it recorded; it goes on past a group that fails and returns
// the failures joined.
func (e *Engine) RecoverAll(ctx context.Context) ([]store.Event, error) {
	if e.Owner.ID == "" {
		return nil, errors.New("recover: the engine has no lease owner")
	}
	type group struct{ runtime, kind string }
	groups := map[group][]string{}
	add := func(w store.Workload) {
		if recoverable(w) {
			g := group{w.Runtime, w.Kind}
			groups[g] = append(groups[g], w.RuntimeID)
		}
	}
	// The live records recoverable can pick, chosen in SQL, so that the
	// scan does not bring every live record into Go only to skip it.
	for _, f := range []store.ScanFilter{
		{States: []store.State{store.StateStopping}},
		{States: []store.State{store.StateCreated, store.StateStarting}, NoUID: true},
	} {
		err := e.Store.ScanLive(ctx, f, recoverPage, func(page []store.LiveRecord) error {
			for _, w := range page {
				add(w.Workload)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	deleted, err := e.Store.UnconfirmedDeletes(ctx)
	if err != nil {
		return nil, err
	}
	for _, w := range deleted {
		add(w)
	}
	var (
		evs  []store.Event
		errs []error
	)
	keys := slices.SortedFunc(maps.Keys(groups), func(a, b group) int {
		if a.runtime != b.runtime {
			return cmp.Compare(a.runtime, b.runtime)
		}
		return cmp.Compare(a.kind, b.kind)
	})
	for _, g := range keys {
		got, err := e.recoverGroup(ctx, g.runtime, g.kind, groups[g])
		evs = append(evs, got...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return evs, errors.Join(errs...)
}

// recoverGroup is RecoverAll over ids, records of one runtime and kind.
func (e *Engine) recoverGroup(ctx context.Context, rt, kind string, ids []string) ([]store.Event, error) {
	k, err := runtime.KindOf(kind)
	if err != nil {
		return nil, err
	}
	client, err := e.Client(rt)
	if err != nil {
		return nil, err
	}
	cur := ""
	if e.Cluster != nil {
		if cur, err = e.Cluster(rt); err != nil {
			return nil, err
		}
	}

	// 1. The verb locks, then the records as they are now.
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = verbLockPrefix + id
	}
	locked, err := e.Store.AcquireLeases(ctx, e.Owner, keys, LeaseTTL)
	if err != nil || len(locked) == 0 {
		return nil, err // every one is a verb of a live process under way
	}
	defer func() { _ = e.Store.ReleaseLeases(context.WithoutCancel(ctx), e.Owner, locked...) }()
	defer e.renewLeases(ctx)()

	ids = ids[:0]
	for _, key := range locked {
		ids = append(ids, key[len(verbLockPrefix):])
	}
	recs, err := e.Store.Records(ctx, ids)
	if err != nil {
		return nil, err
	}
	var others map[string]string
	if cur != "" {
		if others, err = e.Store.Clusters(ctx, ids); err != nil {
			return nil, err
		}
	}
	type key struct{ ns, name string }
	todo := map[key]store.Workload{}
	nss := map[string]bool{}
	for _, id := range ids {
		w, ok := recs[id]
		if !ok || !recoverable(w) {
			continue // the record moved on, or is gone
		}
		if rec := others[id]; rec != "" && rec != cur {
			continue // another cluster's: nothing here says anything about it
		}
		todo[key{w.Namespace, w.Name}] = w
		nss[w.Namespace] = true
	}
	if len(todo) == 0 {
		return nil, nil
	}

	// 2. What the cluster shows of their objects, in one stream per namespace.
	seen := map[key]sighting{}
	idle := e.SyncTimeout
	err = monitor.StreamObjects(ctx, client, kind, slices.Sorted(maps.Keys(nss)), idle, func(obj metav1.Object) error {
		kk := key{obj.GetNamespace(), obj.GetName()}
		if _, ok := todo[kk]; ok {
			seen[kk] = sightingOf(k, obj)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("recover %s %ss: %w", rt, kind, err)
	}
	var history []string
	for kk, w := range todo {
		if seen[kk].needsHistory(w) {
			history = append(history, w.RuntimeID)
		}
	}
	known := map[string]map[string]bool{} // runtime ID -> the UIDs its events name
	if len(history) > 0 {
		evs, err := e.Store.Events(ctx, history...)
		if err != nil {
			return nil, err
		}
		for _, ev := range evs {
			if known[ev.RuntimeID] == nil {
				known[ev.RuntimeID] = map[string]bool{}
			}
			known[ev.RuntimeID][ev.UID] = true
		}
	}

	// 3. What Recover would record, in one batch.
	var ts []store.Transition
	for _, kk := range slices.SortedFunc(maps.Keys(todo), func(a, b key) int {
		if a.ns != b.ns {
			return cmp.Compare(a.ns, b.ns)
		}
		return cmp.Compare(a.name, b.name)
	}) {
		w := todo[kk]
		id, err := runtimeid.Parse(w.RuntimeID)
		if err != nil {
			return nil, err
		}
		s := seen[kk]
		if t, ok := healing(k, id, w, s, known[w.RuntimeID][s.uid]); ok {
			ts = append(ts, t)
		}
	}
	if len(ts) == 0 {
		return nil, nil
	}
	as, err := e.Store.ApplyBatchNoSpecs(ctx, ts)
	if errors.Is(err, store.ErrNotFound) {
		// A record was removed meanwhile: the others one at a time.
		as, err = nil, nil
		for _, t := range ts {
			a, aerr := e.Store.ApplyBatchNoSpecs(ctx, []store.Transition{t})
			switch {
			case errors.Is(aerr, store.ErrNotFound):
			case aerr != nil:
				err = aerr
			default:
				as = append(as, a...)
			}
		}
	}
	var out []store.Event
	for _, a := range as {
		if a.Applied {
			out = append(out, a.Event)
		}
	}
	return out, err
}
