package cmd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/gobrave/kubectl-gobrave/pkg/runtime"
	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// ParseRef checks the shape of an argument that names a workload without any
// I/O: a full runtime ID, deployment/NAME, job/NAME or a bare NAME.
func ParseRef(arg string) error {
	switch {
	case strings.Contains(arg, "|"):
		_, err := runtimeid.Parse(arg)
		return err
	case strings.Contains(arg, "/"):
		kind, name, _ := strings.Cut(arg, "/")
		kind = normalizeKind(kind)
		if !runtimeid.IsKind(kind) {
			return usageErrorf("%q: unknown kind %q (use deployment/NAME, job/NAME, a bare NAME or a runtime ID such as %s)", arg, kind, "k8s-default|deployment|web-api")
		}
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			return usageErrorf("%q: name %q is not a DNS-1123 label: %s", arg, name, errs[0])
		}
	default:
		if errs := validation.IsDNS1123Label(arg); len(errs) > 0 {
			return usageErrorf("%q is neither a runtime ID (%s) nor a workload name: %s", arg, runtimeid.Format, errs[0])
		}
	}
	return nil
}

func normalizeKind(k string) string {
	switch strings.ToLower(k) {
	case "deployment", "deployments", "deploy", "deployment.apps":
		return runtimeid.KindDeployment
	case "job", "jobs", "job.batch":
		return runtimeid.KindJob
	}
	return k
}

// Resolve turns an argument into a recorded workload: a full runtime ID,
// deployment/NAME or job/NAME (namespace from -n, the profile or the
// kubeconfig; runtime from --runtime or the profile file), or a bare NAME
// when exactly one record has that name.
func (f *Factory) Resolve(ctx context.Context, st *store.Store, arg string) (store.Workload, error) {
	if err := ParseRef(arg); err != nil {
		return store.Workload{}, err
	}
	switch {
	case strings.Contains(arg, "|"):
		return get(ctx, st, arg)
	case strings.Contains(arg, "/"):
		kind, name, _ := strings.Cut(arg, "/")
		rt, err := f.Runtime()
		if err != nil {
			return store.Workload{}, err
		}
		ns, err := f.Namespace(rt, "")
		if err != nil {
			return store.Workload{}, err
		}
		id := runtimeid.ID{Runtime: rt, Namespace: ns, Kind: normalizeKind(kind), Name: name}
		return get(ctx, st, id.String())
	}
	ws, err := st.List(ctx, store.Filter{All: true, Name: arg})
	if err != nil {
		return store.Workload{}, err
	}
	switch len(ws) {
	case 0:
		return store.Workload{}, notFound(fmt.Sprintf("no workload named %q in the state database %s (see 'kubectl gobrave ps -a')", arg, st.Path()))
	case 1:
		return ws[0], nil
	}
	ids := make([]string, len(ws))
	for i, w := range ws {
		ids[i] = w.RuntimeID
	}
	return store.Workload{}, usageErrorf("%q matches %d workloads: %s (pass the full runtime ID)", arg, len(ws), strings.Join(ids, ", "))
}

func get(ctx context.Context, st *store.Store, id string) (store.Workload, error) {
	w, err := st.Get(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return w, notFound(fmt.Sprintf("%s is not in the state database %s (see 'kubectl gobrave ps -a')", id, st.Path()))
	}
	return w, err
}

// resolveAll resolves every argument, checking their shape first so that a
// bad argument is reported before any work is done.
func (f *Factory) resolveAll(ctx context.Context, args []string) (*store.Store, []store.Workload, error) {
	for _, a := range args {
		if err := ParseRef(a); err != nil {
			return nil, nil, err
		}
	}
	st, err := f.Store(ctx)
	if err != nil {
		return nil, nil, err
	}
	var (
		out  []store.Workload
		errs []error
		seen = map[string]bool{}
	)
	for _, a := range args {
		w, err := f.Resolve(ctx, st, a)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !seen[w.RuntimeID] {
			seen[w.RuntimeID] = true
			out = append(out, w)
		}
	}
	// The resolved workloads come back even when others failed, so a verb
	// over many IDs can act on the good ones and report the rest.
	return st, out, errors.Join(errs...)
}

// WorkloadView is the stable JSON/YAML form of a workload record.
type WorkloadView struct {
	RuntimeID string `json:"runtimeID"`
	Runtime   string `json:"runtime"`
	Namespace string `json:"namespace"`
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	State     string `json:"state"`
	Message   string `json:"message"`
	// Reason, ExitCode, StartedAt and FinishedAt: the structured result
	// of the current run (store.Result); null when unknown.
	Reason     string     `json:"reason"`
	ExitCode   *int32     `json:"exitCode"`
	StartedAt  *time.Time `json:"startedAt"`
	FinishedAt *time.Time `json:"finishedAt"`
	CreatedAt  time.Time  `json:"createdAt"`
	UpdatedAt  time.Time  `json:"updatedAt"`
}

// EventView is the stable JSON/YAML form of an event.
type EventView struct {
	RuntimeID string    `json:"runtimeID"`
	Type      string    `json:"type"`
	Message   string    `json:"message"`
	UID       string    `json:"uid"`
	Time      time.Time `json:"time"`
	// The event's structured result (store.Result); null when unknown.
	Reason     string     `json:"reason"`
	ExitCode   *int32     `json:"exitCode"`
	StartedAt  *time.Time `json:"startedAt"`
	FinishedAt *time.Time `json:"finishedAt"`
}

func viewOf(w store.Workload) WorkloadView {
	return WorkloadView{
		RuntimeID: w.RuntimeID, Runtime: w.Runtime, Namespace: w.Namespace, Kind: w.Kind, Name: w.Name,
		UID: w.UID, State: string(w.State), Message: w.Message,
		Reason: w.Reason, ExitCode: w.ExitCode, StartedAt: utc(w.StartedAt), FinishedAt: utc(w.FinishedAt),
		CreatedAt: w.CreatedAt.UTC().Truncate(time.Second), UpdatedAt: w.UpdatedAt.UTC().Truncate(time.Second),
	}
}

// utc is a result's time in UTC to the second, as the record's other times.
func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC().Truncate(time.Second)
	return &u
}

// exitCodeText is an exit code for a table: <none> when unknown.
func exitCodeText(c *int32) string {
	if c == nil {
		return "<none>"
	}
	return fmt.Sprint(*c)
}

func eventViewOf(e store.Event) EventView {
	return EventView{RuntimeID: e.RuntimeID, Type: string(e.Type), Message: e.Message, UID: e.UID, Time: e.Time.UTC(),
		Reason: e.Reason, ExitCode: e.ExitCode, StartedAt: utc(e.StartedAt), FinishedAt: utc(e.FinishedAt)}
}

func validateOutput(o string, allowed ...string) error {
	if slices.Contains(allowed, o) {
		return nil
	}
	var names []string
	for _, a := range allowed {
		if a != "" {
			names = append(names, a)
		}
	}
	return usageErrorf("output format %q is not supported (use one of: %s)", o, strings.Join(names, ", "))
}

func yamlMarshal(v any) ([]byte, error) { return yaml.Marshal(v) }

func age(t time.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}

// ref is kubectl's resource/name of a workload, e.g. deployment.apps/web.
func ref(kind, name string) string {
	if k, err := runtime.KindOf(kind); err == nil {
		return k.Resource() + "/" + name
	}
	return kind + "/" + name
}

// notFoundError reads as its message and matches store.ErrNotFound.
type notFoundError string

func notFound(msg string) error              { return notFoundError(msg) }
func (e notFoundError) Error() string        { return string(e) }
func (e notFoundError) Is(target error) bool { return target == store.ErrNotFound }

// Selection picks records by what they are rather than by ID: ps's filters
// and the -l/--all of the lifecycle verbs. The namespace (-n), --runtime and
// --context are the global flags.
type Selection struct {
	// Selector is a label selector (-l) over the workload's labels: the
	// spec's labels with app and gobrave-workload set to its name.
	Selector string
	// States, when set, keeps only these states.
	States []string
	// Kind keeps one kind: deployment or job (deploy, jobs ... accepted).
	Kind string
	// AllNamespaces ignores -n.
	AllNamespaces bool

	selector labels.Selector
}

func (s *Selection) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&s.Selector, "selector", "l", s.Selector, "Only workloads whose labels match this selector (e.g. -l app=web,tier!=cache; labels are the spec's labels plus app=NAME and gobrave-workload=NAME)")
	cmd.Flags().StringSliceVar(&s.States, "state", s.States, "Only these states: created, starting, running, paused, stopping, exited, failed, deleted")
	cmd.Flags().StringVar(&s.Kind, "kind", s.Kind, "Only this kind: deployment (a service) or job (a task)")
}

// validate checks the selection without I/O.
func (s *Selection) validate() error {
	for _, st := range s.States {
		if !slices.Contains(allStates, store.State(st)) {
			return usageErrorf("--state %q is not a state (use created, starting, running, paused, stopping, exited, failed or deleted)", st)
		}
	}
	if s.Kind != "" {
		k := kindFlag(s.Kind)
		if !runtimeid.IsKind(k) {
			return usageErrorf("--kind %q: use deployment (service) or job (task)", s.Kind)
		}
	}
	if s.Selector != "" {
		sel, err := labels.Parse(s.Selector)
		if err != nil {
			return usageErrorf("-l %q is not a label selector: %v", s.Selector, err)
		}
		s.selector = sel
	}
	return nil
}

// kindFlag maps --kind, with docker's words service and task, to a kind.
func kindFlag(k string) string {
	switch strings.ToLower(k) {
	case "service", "services", "svc":
		return runtimeid.KindDeployment
	case "task", "tasks":
		return runtimeid.KindJob
	}
	return normalizeKind(k)
}

// query turns the selection into a store query: all (or only the
// non-terminal records) when no state is given.
func (f *Factory) query(s *Selection, all, needSpec bool) (store.Query, error) {
	q := store.Query{Filter: store.Filter{All: all, Runtime: f.RuntimeFlag, NoSpec: !needSpec}}
	if s.Kind != "" {
		q.Kind = kindFlag(s.Kind)
	}
	for _, st := range s.States {
		q.States = append(q.States, store.State(st))
	}
	if !s.AllNamespaces && f.ConfigFlags.Namespace != nil {
		q.Namespace = *f.ConfigFlags.Namespace
	}
	if f.ConfigFlags.Context != nil && *f.ConfigFlags.Context != "" {
		// The records made on the cluster that context points at now.
		id, err := f.ClusterID("")
		if err != nil {
			return q, usageErrorf("--context %q: %v", *f.ConfigFlags.Context, err)
		}
		q.Cluster = id
	}
	if s.selector != nil && !s.selector.Empty() {
		q.NoSpec = false
		sel := s.selector
		q.Match = func(w store.Workload) bool { return sel.Matches(labels.Set(workloadLabels(w))) }
	}
	return q, nil
}

// workloadLabels are the labels of a record's objects.
func workloadLabels(w store.Workload) map[string]string {
	sp := w.Spec
	if sp.Name == "" {
		sp.Name = w.Name
	}
	return runtime.Labels(sp)
}
