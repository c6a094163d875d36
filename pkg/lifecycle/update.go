package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/gobrave/kubectl-gobrave/pkg/runtime"
	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/spec"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// ErrNoChange is returned by Update when the new spec is the recorded one
// and the cluster has it: nothing is recorded or sent.
var ErrNoChange = errors.New("no change")

// UpdateResult is what Update did.
type UpdateResult struct {
	// Workload is the record afterwards.
	Workload store.Workload
	// Revision holds the new spec (the recorded one with ErrNoChange).
	Revision store.Revision
	// Rollout: new pods are rolling out (a service with replicas); the
	// record is starting until they run.
	Rollout bool
	// Change says what changed ("image nginx:1.27 → nginx:1.28").
	Change string
}

// Update makes next the spec of the record w: intent first (a SpecUpdated
// event, a new epoch, the new revision and the record's spec, in one
// transaction), then the kind's Update (a service's Deployment gets the new
// pod template and spec annotation and rolls out; a job is left running and
// its next run uses the new spec). note, when set, starts the revision's
// change text (e.g. "back to revision 1").
//
// The new spec is checked as a spec file is, and its pods by a server-side
// dry run, before anything is recorded; a refused update leaves the record
// and its revisions as they were (a RequestFailed says why). An update to
// the recorded spec is ErrNoChange, unless the service's object does not
// carry it (a process killed between the intent and the update): then it is
// sent again, without a new revision.
func (e *Engine) Update(ctx context.Context, w store.Workload, next spec.ContainerSpec, note string) (UpdateResult, error) {
	id, err := runtimeid.Parse(w.RuntimeID)
	if err != nil {
		return UpdateResult{Workload: w}, err
	}
	k, err := runtime.KindOf(id.Kind)
	if err != nil {
		return UpdateResult{Workload: w}, err
	}
	client, err := e.Client(id.Runtime)
	if err != nil {
		return UpdateResult{Workload: w}, err
	}
	unlock, err := e.lock(ctx, w.RuntimeID)
	if err != nil {
		return UpdateResult{Workload: w}, fmt.Errorf("update %s: %w", id, err)
	}
	defer unlock()
	if w, err = e.Store.Get(ctx, w.RuntimeID); err != nil {
		return UpdateResult{Workload: w}, err
	}
	if err := e.checkCluster(ctx, id, "update"); err != nil {
		return UpdateResult{Workload: w}, err
	}
	if w.State == store.StateDeleted {
		return UpdateResult{Workload: w}, fmt.Errorf("update %s: %w (create it again with 'kubectl gobrave create')", id, ErrDeleted)
	}
	if err := CheckUpdate(w, &next); err != nil {
		return UpdateResult{Workload: w}, err
	}

	// Read first: an unreachable server leaves the database as it was.
	obj, err := k.Get(ctx, client, id.Namespace, id.Name)
	switch {
	case apierrors.IsNotFound(err):
		obj = nil
	case err != nil:
		return UpdateResult{Workload: w}, fmt.Errorf("update %s: %w", id, err)
	}
	if obj != nil && w.UID != "" && string(obj.GetUID()) != w.UID {
		return UpdateResult{Workload: w}, fmt.Errorf("update %s: the %s named %s in the cluster is another object (uid %s, recorded %s), left alone (take it over with 'kubectl gobrave adopt -n %s')",
			id, id.Kind, id.Name, obj.GetUID(), w.UID, id.Namespace)
	}
	plan, err := k.PlanUpdate(id, obj, w.Spec)
	if err != nil {
		return UpdateResult{Workload: w}, err
	}
	// The recorded spec as CheckUpdate made next: an adopted record's may
	// lack the namespace or the defaults.
	recorded := w.Spec
	if recorded.RuntimeNamespace == "" {
		recorded.RuntimeNamespace = w.Namespace
	}
	recorded.Normalize()
	change := Change(recorded, next)
	if store.SameSpec(recorded, next) {
		if !plan.Send || plan.InSync {
			revs, err := e.Store.Revisions(ctx, w.RuntimeID)
			if err != nil {
				return UpdateResult{Workload: w}, err
			}
			return UpdateResult{Workload: w, Revision: revs[len(revs)-1]}, ErrNoChange
		}
		change = "sent again: the " + id.Kind + " did not carry the recorded spec"
	}
	if note != "" {
		change = note + ": " + change
	}
	objs, err := runtime.Build(next, id.Namespace)
	if err != nil {
		return UpdateResult{Workload: w}, err
	}
	// Pod Security judges pods, not templates: ask about a pod of the new
	// template before anything is recorded.
	if err := runtime.CheckPods(ctx, client, id.Namespace, next, objs, id.Kind); err != nil {
		return UpdateResult{Workload: w}, fmt.Errorf("update %s: %w", id, err)
	}

	// 1. The intent: the event, the revision and the record's spec.
	t := store.Transition{RuntimeID: w.RuntimeID, Type: store.SpecUpdated, Message: plan.Message + " (" + change + ")"}
	if plan.Rollout {
		t.Expect = store.ContainerStarted
	}
	applied, rev, err := e.Store.UpdateSpec(ctx, t, next, change)
	if err != nil {
		return UpdateResult{Workload: w}, fmt.Errorf("record the update of %s: %w", id, err)
	}
	epoch := applied.Workload.Epoch
	res := UpdateResult{Workload: applied.Workload, Revision: rev, Rollout: plan.Rollout, Change: change}

	// 2. The action.
	dbCtx := context.WithoutCancel(ctx)
	if plan.Send {
		if err := k.Update(ctx, client, id, plan, objs); err != nil {
			ft := store.Transition{RuntimeID: w.RuntimeID, Type: store.RequestFailed, Epoch: epoch, Message: err.Error(),
				Restore: w.State, RestoreRequest: w.Request, RestoreExpect: w.Expect}
			var rerr error
			if outcomeUnknown(ctx, err) {
				// The spec may have reached the object: keep the revision;
				// an update to the same spec sends it again.
				ft.Restore = ""
				ft.Message = "outcome unknown (" + err.Error() + "): run the update again to send the spec, or 'kubectl gobrave recover --once' to record the rollout"
				_, rerr = e.record(dbCtx, ft)
			} else {
				rerr = e.Store.RevertSpec(dbCtx, ft, epoch)
			}
			if rerr != nil {
				err = errors.Join(err, fmt.Errorf("record the failure of the update of %s: %w", id, rerr))
			}
			cur, _ := e.Store.Get(dbCtx, w.RuntimeID)
			return UpdateResult{Workload: cur}, err
		}
	}

	// 3. Confirm what a read can tell at once.
	e.confirm(dbCtx, client, k, id, epoch)
	cur, err := e.Store.Get(dbCtx, w.RuntimeID)
	if err != nil {
		return res, err
	}
	res.Workload = cur
	return res, nil
}

// CheckUpdate checks next as a new spec of the record w, as a spec file is
// checked, and normalises it: the name, kind and namespace are the
// record's, and the port and its Service stay (update changes the pod
// template, not the Service: delete and create again to change them).
// Errors wrap spec.ErrInvalid. No I/O.
func CheckUpdate(w store.Workload, next *spec.ContainerSpec) error {
	if next.RuntimeNamespace == "" {
		next.RuntimeNamespace = w.Namespace
	}
	bad := func(what, was, now string) error {
		return fmt.Errorf("%w: update %s: the %s cannot change (%s → %s): delete the workload and create it again", spec.ErrInvalid, w.RuntimeID, what, was, now)
	}
	switch {
	case next.Name != w.Name:
		return bad("name", w.Name, next.Name)
	case next.Kind() != w.Kind:
		return bad("kind", w.Kind, next.Kind())
	case next.RuntimeNamespace != w.Namespace:
		return bad("namespace", w.Namespace, next.RuntimeNamespace)
	case next.ExposedPort != w.Spec.ExposedPort:
		return bad("port", strconv.Itoa(int(w.Spec.ExposedPort)), strconv.Itoa(int(next.ExposedPort)))
	case next.ExposeService != w.Spec.ExposeService:
		return bad("exposure (--expose)", strconv.FormatBool(w.Spec.ExposeService), strconv.FormatBool(next.ExposeService))
	}
	if err := next.Validate(); err != nil {
		return err
	}
	if err := runtime.EnsureImage(*next); err != nil {
		return err
	}
	next.Normalize()
	if w.Kind == runtimeid.KindDeployment {
		if _, err := next.ProgressDeadlineSeconds(); err != nil {
			return err
		}
	}
	return nil
}

// Change summarises what differs from old to next, field by field in the
// spec's order: "image nginx:1.27 → nginx:1.28; env +DEBUG, -MODE". Env
// values are not shown (only the names): a history is read by many.
func Change(old, next spec.ContainerSpec) string {
	var parts []string
	val := func(name, a, b string) {
		if a != b {
			parts = append(parts, fmt.Sprintf("%s %s → %s", name, orNone(a), orNone(b)))
		}
	}
	list := func(name string, a, b []string) {
		if !slices.Equal(a, b) {
			parts = append(parts, fmt.Sprintf("%s %s → %s", name, words(a), words(b)))
		}
	}
	keys := func(name string, a, b map[string]string, showValues bool) {
		var d []string
		for _, k := range sortedKeys(a, b) {
			av, inA := a[k]
			bv, inB := b[k]
			switch {
			case !inA:
				d = append(d, "+"+k+valueNote(showValues, bv))
			case !inB:
				d = append(d, "-"+k)
			case av != bv:
				d = append(d, "~"+k+valueNote(showValues, bv))
			}
		}
		if len(d) > 0 {
			parts = append(parts, name+" "+strings.Join(d, ", "))
		}
	}
	val("image", old.Image, next.Image)
	list("entrypoint", old.Entrypoint, next.Entrypoint)
	list("command", old.Command, next.Command)
	val("workDir", old.WorkDir, next.WorkDir)
	keys("env", old.Env, next.Env, false)
	if !reflect.DeepEqual(old.EnvSecrets, next.EnvSecrets) {
		es := func(v []spec.EnvSecret) []string {
			var out []string
			for _, e := range v {
				out = append(out, e.Name+"="+e.Secret+"/"+e.Key)
			}
			return out
		}
		list("envSecrets", es(old.EnvSecrets), es(next.EnvSecrets))
	}
	list("envFromSecrets", old.EnvFromSecrets, next.EnvFromSecrets)
	val("cpu", cpuText(old.CPU), cpuText(next.CPU))
	val("memory", string(old.Memory), string(next.Memory))
	if !reflect.DeepEqual(old.Volumes, next.Volumes) {
		vs := func(v []spec.Volume) []string {
			var out []string
			for _, x := range v {
				s := x.Source + ":" + x.Target
				if x.ReadOnly {
					s += ":ro"
				}
				out = append(out, s)
			}
			return out
		}
		list("volumes", vs(old.Volumes), vs(next.Volumes))
	}
	if old.AllowUnsafeHostPath != next.AllowUnsafeHostPath {
		val("allowUnsafeHostPath", strconv.FormatBool(old.AllowUnsafeHostPath), strconv.FormatBool(next.AllowUnsafeHostPath))
	}
	val("securityProfile", old.SecurityProfile, next.SecurityProfile)
	val("user", old.User, next.User)
	keys("labels", old.Labels, next.Labels, true)
	val("pullPolicy", old.PullPolicy, next.PullPolicy)
	if !reflect.DeepEqual(old.SchedulingConstraints, next.SchedulingConstraints) {
		cs := func(v []spec.SchedulingConstraint) []string {
			var out []string
			for _, c := range v {
				out = append(out, strings.TrimSpace(c.Key+" "+c.Operator+" "+strings.Join(c.Values, ",")))
			}
			return out
		}
		list("nodeConstraints", cs(old.SchedulingConstraints), cs(next.SchedulingConstraints))
	}
	val("progressDeadline", old.ProgressDeadline, next.ProgressDeadline)
	if len(parts) == 0 {
		return "no change"
	}
	return strings.Join(parts, "; ")
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func words(v []string) string {
	if len(v) == 0 {
		return "<none>"
	}
	return "[" + strings.Join(v, " ") + "]"
}

func valueNote(show bool, v string) string {
	if !show {
		return ""
	}
	return "=" + v
}

func cpuText(c float64) string {
	if c == 0 {
		return ""
	}
	return strconv.FormatFloat(c, 'f', -1, 64)
}

func sortedKeys(a, b map[string]string) []string {
	var ks []string
	for k := range a {
		ks = append(ks, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	return ks
}
