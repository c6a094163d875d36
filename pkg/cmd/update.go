package cmd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/gobrave/kubectl-gobrave/pkg/lifecycle"
	"github.com/gobrave/kubectl-gobrave/pkg/spec"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// UpdateOptions are the options of update.
type UpdateOptions struct {
	genericiooptions.IOStreams
	f     *Factory
	flags specFlags
	// Set lists the flags given, so that an empty value (--workdir '')
	// clears a field.
	set        map[string]bool
	ToRevision int
	Wait       bool
	Timeout    time.Duration
	Output     string

	arg string
}

// updateSpecFlags are the create/run flags update takes: the ones that
// change the pod template. The name, kind, port and exposure are fixed.
var updateSpecFlags = []string{"filename", "image", "entrypoint", "workdir", "env", "env-secret", "env-from-secret",
	"security-profile", "allow-unsafe-host-path", "cpu", "memory", "volume", "user", "label", "pull-policy",
	"progress-deadline", "node-constraint"}

// NewCmdUpdate changes the spec of a recorded workload.
func NewCmdUpdate(f *Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &UpdateOptions{IOStreams: streams, f: f, Wait: true, Timeout: 5 * time.Minute}
	cmd := &cobra.Command{
		Use:   "update ID [--image IMAGE] [--env KEY=VALUE|KEY-] [--cpu N] [--memory Q] [flags] | update ID --to-revision N",
		Short: "Change a workload's spec: a service rolls out, a job's next run uses it",
		Long: `Change the recorded spec of a workload and keep the old one as a revision ('kubectl gobrave
history ID' lists them). The flags are those of create that shape the pod: each one given replaces
that field of the recorded spec (-f replaces the whole spec with a spec file's, and the flags
then apply to it); --env KEY-, --label KEY- and --env-from-secret NAME- remove one entry, --volume
adds a mount or replaces the one with the same container path, and --node-constraint replaces all
constraints. The name, kind, port and --expose cannot change: delete and create again.

The new spec is checked like a spec file, and a pod of it is shown to the API server in a dry run,
before anything is recorded or sent. A service (Deployment) gets the new pod template and
gobrave.dev/spec annotation and rolls out; by default update waits until the new pods run, and
fails fast (exit 1) when they cannot, as run and start --wait do. A stopped service takes the spec
at its next start. A job is not touched: the run under way goes on, and its next run (start,
restart) is made from the new spec.

--to-revision N makes revision N the spec again, as a new revision (like kubectl rollout undo).
An update that changes nothing says so and records nothing.

ID is a runtime ID (k8s-default|deployment|web), deployment/NAME or job/NAME, or a bare NAME
that exactly one record has.`,
		Example: `  # Roll a service forward, then back to its first spec (see 'kubectl gobrave history web')
  kubectl gobrave update web --image nginx:1.28
  kubectl gobrave update web --to-revision 1

  # A job's next run (start, restart) gets more memory and a new variable
  kubectl gobrave update job/import --memory 512Mi --env MODE=full

  # Remove a variable; do not wait for the rollout
  kubectl gobrave update web --env DEBUG- --wait=false`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Complete(cmd, args); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	all := cmd.Flags()
	o.flags.addFlags(all)
	// Keep the pod's flags only: the others are fixed by the record.
	for _, name := range []string{"kind", "port", "expose"} {
		_ = all.MarkHidden(name)
	}
	cmd.Flags().IntVar(&o.ToRevision, "to-revision", o.ToRevision, "Make revision N (see 'kubectl gobrave history ID') the spec again, as a new revision")
	cmd.Flags().BoolVar(&o.Wait, "wait", o.Wait, "For a service that rolls out: wait until the new pods run")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", o.Timeout, "How long --wait waits, e.g. 30s or 2m")
	cmd.Flags().StringVarP(&o.Output, "output", "o", o.Output, "Output format: json or yaml prints the record instead of the confirmation")
	return cmd
}

// Complete reads the argument and which flags were given.
func (o *UpdateOptions) Complete(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return usageErrorf("update needs one ID, got %d (see 'kubectl gobrave update --help')", len(args))
	}
	o.arg = args[0]
	o.set = map[string]bool{}
	for _, name := range append([]string{"kind", "port", "expose"}, updateSpecFlags...) {
		if cmd.Flags().Changed(name) {
			o.set[name] = true
		}
	}
	return nil
}

// Validate checks the flags without any I/O.
func (o *UpdateOptions) Validate() error {
	if err := ParseRef(o.arg); err != nil {
		return err
	}
	if err := validateOutput(o.Output, "", "json", "yaml"); err != nil {
		return err
	}
	if o.Timeout <= 0 {
		return usageErrorf("--timeout %s must be positive", o.Timeout)
	}
	for _, name := range []string{"kind", "port", "expose"} {
		if o.set[name] {
			return usageErrorf("--%s cannot be changed by update: delete the workload and create it again", name)
		}
	}
	switch {
	case o.ToRevision < 0:
		return usageErrorf("--to-revision %d: revisions are numbered from 1 (see 'kubectl gobrave history %s')", o.ToRevision, o.arg)
	case o.ToRevision > 0 && len(o.set) > 0:
		return usageErrorf("--to-revision takes no other spec flag: go back first, then update")
	case o.ToRevision == 0 && len(o.set) == 0:
		return usageErrorf("nothing to update: pass --image, --env, --cpu, --memory … or --to-revision N (see 'kubectl gobrave update --help')")
	}
	return nil
}

// Run resolves the record, builds the new spec and updates it.
func (o *UpdateOptions) Run(ctx context.Context) error {
	st, err := o.f.Store(ctx)
	if err != nil {
		return err
	}
	w, err := o.f.Resolve(ctx, st, o.arg)
	if err != nil {
		return err
	}
	next, note, err := o.nextSpec(ctx, st, w)
	if err != nil {
		return err
	}
	e, err := o.f.engine(ctx)
	if err != nil {
		return err
	}
	res, err := e.Update(ctx, w, next, note)
	what := ref(w.Kind, w.Name)
	if errors.Is(err, lifecycle.ErrNoChange) {
		if o.Output != "" {
			return printData(o.Out, o.Output, viewOf(res.Workload))
		}
		fmt.Fprintf(o.Out, "%s unchanged (revision %d, %s)\n", what, res.Revision.Revision, w.RuntimeID)
		return nil
	}
	if err != nil {
		return err
	}
	if res.Rollout && o.Wait {
		wctx, cancel := context.WithTimeout(ctx, o.Timeout)
		defer cancel()
		if err := o.f.waitFor(wctx, st, []store.Workload{res.Workload}, ConditionStarted, o.Timeout, o.ErrOut); err != nil {
			if stuck := (*StuckError)(nil); errors.As(err, &stuck) {
				return err
			}
			return fmt.Errorf("update %s to revision %d: %w", w.RuntimeID, res.Revision.Revision, err)
		}
	}
	if o.Output != "" {
		cur, err := st.Get(ctx, w.RuntimeID)
		if err != nil {
			return err
		}
		return printData(o.Out, o.Output, viewOf(cur))
	}
	after := ""
	switch {
	case res.Rollout && o.Wait:
		after = ", rolled out"
	case res.Rollout:
		after = ", rolling out"
	case w.Kind == "job":
		after = "; its next run (start, restart) uses it"
	default:
		after = "; it runs at the next start"
	}
	fmt.Fprintf(o.Out, "%s updated to revision %d (%s)%s (%s)\n", what, res.Revision.Revision, escapeTerminal(res.Change), after, w.RuntimeID)
	return nil
}

// nextSpec is the spec the flags (or --to-revision) make of w's, and the
// note that starts the revision's change text.
func (o *UpdateOptions) nextSpec(ctx context.Context, st *store.Store, w store.Workload) (spec.ContainerSpec, string, error) {
	if o.ToRevision > 0 {
		revs, err := st.Revisions(ctx, w.RuntimeID)
		if err != nil {
			return spec.ContainerSpec{}, "", err
		}
		if o.ToRevision > len(revs) {
			return spec.ContainerSpec{}, "", usageErrorf("--to-revision %d: %s has revisions 1 to %d (see 'kubectl gobrave history %s')", o.ToRevision, w.RuntimeID, len(revs), o.arg)
		}
		return revs[o.ToRevision-1].Spec, fmt.Sprintf("back to revision %d", o.ToRevision), nil
	}
	next, err := o.flags.apply(w.Spec, o.set)
	return next, "", err
}

// apply makes the flags given (set) of s into a new spec based on base:
// the spec file's when -f is given, else base. Parsing errors are bad
// input; the spec itself is checked by the lifecycle engine.
func (s *specFlags) apply(base spec.ContainerSpec, set map[string]bool) (spec.ContainerSpec, error) {
	cs := clone(base)
	if set["filename"] {
		file, err := spec.LoadFile(s.File)
		if err != nil {
			if !errors.Is(err, spec.ErrInvalid) {
				err = fmt.Errorf("%w: %w (check --filename)", ErrUsage, err)
			}
			return cs, err
		}
		if file.Name != "" && file.Name != base.Name {
			return cs, usageErrorf("--filename %s names %q, not %q: update keeps the name", s.File, file.Name, base.Name)
		}
		file.Name = base.Name
		if file.RuntimeNamespace == "" {
			file.RuntimeNamespace = base.RuntimeNamespace
		}
		cs = file
	}
	str := func(flag string, dst *string, v string) {
		if set[flag] {
			*dst = v
		}
	}
	str("image", &cs.Image, s.Image)
	str("workdir", &cs.WorkDir, s.WorkDir)
	str("user", &cs.User, s.User)
	str("pull-policy", &cs.PullPolicy, s.PullPolicy)
	str("security-profile", &cs.SecurityProfile, s.Profile)
	str("progress-deadline", &cs.ProgressDeadline, string(s.Deadline))
	if set["memory"] {
		cs.Memory = spec.Quantity(s.Memory)
	}
	if set["cpu"] {
		cs.CPU = s.CPU
	}
	if set["allow-unsafe-host-path"] {
		cs.AllowUnsafeHostPath = s.AllowUnsafe
	}
	if set["entrypoint"] {
		cs.Entrypoint = nonEmpty(s.Entrypoint)
	}
	var errs []error
	edit := func(flag string, m *map[string]string, values []string) {
		for _, kv := range values {
			if k, ok := strings.CutSuffix(kv, "-"); ok && !strings.Contains(kv, "=") {
				delete(*m, k)
				continue
			}
			k, v, err := spec.ParseKeyValue(flag, kv)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if *m == nil {
				*m = map[string]string{}
			}
			(*m)[k] = v
		}
		if len(*m) == 0 {
			*m = nil
		}
	}
	edit("env", &cs.Env, s.Env)
	edit("label", &cs.Labels, s.Labels)
	for _, v := range s.EnvSecrets {
		if name, ok := strings.CutSuffix(v, "-"); ok && !strings.Contains(v, "=") {
			cs.EnvSecrets = removeFunc(cs.EnvSecrets, func(e spec.EnvSecret) bool { return e.Name == name })
			continue
		}
		es, err := spec.ParseEnvSecret(v)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cs.EnvSecrets = append(removeFunc(cs.EnvSecrets, func(e spec.EnvSecret) bool { return e.Name == es.Name }), es)
	}
	for _, v := range s.EnvFrom {
		name, drop := strings.CutSuffix(v, "-")
		cs.EnvFromSecrets = removeFunc(cs.EnvFromSecrets, func(e string) bool { return e == name })
		if !drop {
			cs.EnvFromSecrets = append(cs.EnvFromSecrets, v)
		}
	}
	for _, v := range s.Volumes {
		vol, err := spec.ParseVolume(v)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cs.Volumes = append(removeFunc(cs.Volumes, func(x spec.Volume) bool { return x.Target == vol.Target }), vol)
	}
	if set["node-constraint"] {
		cs.SchedulingConstraints = nil
		for _, c := range s.Constraints {
			if c == "" {
				continue // --node-constraint '' removes them all
			}
			sc, err := spec.ParseConstraint(c)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			cs.SchedulingConstraints = append(cs.SchedulingConstraints, sc)
		}
	}
	return cs, errors.Join(errs...)
}

// clone copies s deeply enough that editing its maps and slices leaves s as it is.
func clone(s spec.ContainerSpec) spec.ContainerSpec {
	c := s
	copyMap := func(m map[string]string) map[string]string {
		if m == nil {
			return nil
		}
		out := make(map[string]string, len(m))
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	c.Env, c.Labels = copyMap(s.Env), copyMap(s.Labels)
	c.Entrypoint = append([]string(nil), s.Entrypoint...)
	c.Command = append([]string(nil), s.Command...)
	c.EnvSecrets = append([]spec.EnvSecret(nil), s.EnvSecrets...)
	c.EnvFromSecrets = append([]string(nil), s.EnvFromSecrets...)
	c.Volumes = append([]spec.Volume(nil), s.Volumes...)
	c.SchedulingConstraints = append([]spec.SchedulingConstraint(nil), s.SchedulingConstraints...)
	for i := range c.SchedulingConstraints {
		c.SchedulingConstraints[i].Values = append([]string(nil), s.SchedulingConstraints[i].Values...)
	}
	return normalizeEmpty(c)
}

// normalizeEmpty makes empty lists nil, as a spec read from the database has them.
func normalizeEmpty(c spec.ContainerSpec) spec.ContainerSpec {
	if len(c.Entrypoint) == 0 {
		c.Entrypoint = nil
	}
	if len(c.Command) == 0 {
		c.Command = nil
	}
	if len(c.EnvSecrets) == 0 {
		c.EnvSecrets = nil
	}
	if len(c.EnvFromSecrets) == 0 {
		c.EnvFromSecrets = nil
	}
	if len(c.Volumes) == 0 {
		c.Volumes = nil
	}
	if len(c.SchedulingConstraints) == 0 {
		c.SchedulingConstraints = nil
	}
	return c
}

func nonEmpty(v []string) []string {
	if len(v) == 0 || len(v) == 1 && v[0] == "" {
		return nil
	}
	return v
}

func removeFunc[T any](s []T, del func(T) bool) []T {
	out := s[:0:0]
	for _, x := range s {
		if !del(x) {
			out = append(out, x)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
