package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

type verb struct {
	name    string
	aliases []string
	short   string
	long    string
	example string
	event   store.EventType
	past    string    // what the confirmation says
	waitFor Condition // what --wait blocks on
}

var (
	verbStart = verb{
		name: "start", short: "Start workloads: scale a deployment to 1; run a job again if it was stopped or has finished",
		long: `Start one or more workloads. A deployment is scaled to 1 replica. A job that exists and is
still running is left alone; a job that stop deleted, or that has finished, is created again from the
spec kept in the state database, so it runs again. --wait blocks until each has started.`,
		example: `  kubectl gobrave start k8s-default|deployment|web
  kubectl gobrave start job/import --wait --timeout 2m`,
		event: store.StartRequested, past: "started", waitFor: ConditionStarted,
	}
	verbStop = verb{
		name: "stop", short: "Stop workloads: scale a deployment to 0; delete a job (start runs it again)",
		long: `Stop one or more workloads. A deployment is scaled to 0 replicas; a job is deleted with
foreground propagation (its spec stays in the state database, so 'start' runs it again).
--wait blocks until each has exited.`,
		example: `  kubectl gobrave stop web
  kubectl gobrave stop k8s-default|deployment|web k8s-default|job|import --wait`,
		event: store.StopRequested, past: "stopped", waitFor: ConditionExited,
	}
	verbPause = verb{
		name: "pause", short: "Pause workloads: suspend a job (its pods go, the job stays); scale a deployment to 0",
		long: `Pause one or more workloads. A job is suspended (spec.suspend): the job controller removes its
pods and keeps the job and its completions, and the record is paused until resume (or an
unsuspend from outside) runs it again. A finished job, or one being deleted, has nothing to pause.
A deployment has no suspension: its pause is its stop, scaled to 0 (exited).
--wait blocks until each is paused (a deployment: exited).`,
		example: `  kubectl gobrave pause job/import --wait
  kubectl gobrave pause web`,
		event: store.PauseRequested, past: "paused", waitFor: ConditionPaused,
	}
	verbResume = verb{
		name: "resume", short: "Resume paused workloads: unsuspend a job; scale a deployment to 1 (the same as start)",
		long: `Resume one or more workloads: the same as start. A suspended job is unsuspended (the same job,
its completions kept); a deployment is scaled to 1. --wait blocks until each has started.`,
		example: `  kubectl gobrave resume job/import --wait`,
		event:   store.ResumeRequested, past: "resumed", waitFor: ConditionStarted,
	}
	verbRestart = verb{
		name: "restart", short: "Restart workloads: a rollout restart of a deployment; a fresh run of a job",
		long: `Restart one or more workloads. A deployment gets a rollout restart, as 'kubectl rollout restart'
does it (the pod template's kubectl.kubernetes.io/restartedAt annotation: new pods from the same
template, and a new progress deadline after ProgressDeadlineExceeded), and is scaled to 1. A job is
deleted, whatever its state, and created again from the spec kept in the state database: a fresh
run with a new UID. --wait blocks until each has started (a job that ran to exit code 0 counts).`,
		example: `  kubectl gobrave restart web --wait
  kubectl gobrave restart job/import`,
		event: store.RestartRequested, past: "restarted", waitFor: ConditionStarted,
	}
	verbDelete = verb{
		name: "delete", aliases: []string{"rm"}, short: "Delete workloads and their Service; their records and history stay",
		long: `Delete one or more workloads: a deployment's Service <name>-svc and then the deployment, or a job
(foreground propagation). The record and its history stay in the state database with state deleted.
--wait blocks until the objects are gone.`,
		example: `  kubectl gobrave delete web
  kubectl gobrave rm k8s-default|job|import --wait --timeout 1m`,
		event: store.DeleteRequested, past: "deleted", waitFor: ConditionDeleted,
	}
)

// LifecycleOptions are the options of start, stop, pause, resume, restart and delete.
type LifecycleOptions struct {
	genericiooptions.IOStreams
	f       *Factory
	verb    verb
	Wait    bool
	Timeout time.Duration
	// All and Selection act on the records they select instead of IDs.
	All bool
	Selection
	args []string
}

// NewCmdLifecycle builds one lifecycle verb.
func NewCmdLifecycle(f *Factory, streams genericiooptions.IOStreams, v verb) *cobra.Command {
	o := &LifecycleOptions{IOStreams: streams, f: f, verb: v, Timeout: 5 * time.Minute}
	cmd := &cobra.Command{
		Use:     v.name + " (ID [ID...] | -l SELECTOR | --all)",
		Aliases: v.aliases,
		Short:   v.short,
		Long: v.long + "\n\nID is a runtime ID (k8s-default|deployment|web), deployment/NAME or job/NAME, or a bare NAME\nthat exactly one record has." +
			"\n\n-l and --all act on the records they select instead (every namespace unless -n; --state, --kind,\n--runtime and --context narrow them; deleted records are left out unless --state names deleted),\none line per ID. Selecting nothing is not an error: it says so and exits 0. --timeout bounds the\nwhole command: the IDs not reached when it expires are reported as not attempted.",
		Example: v.example + "\n  kubectl gobrave " + v.name + " -l team=data --kind job\n  kubectl gobrave " + v.name + " --all --state exited -n team-a",
		RunE: func(cmd *cobra.Command, args []string) error {
			o.args = args
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().BoolVar(&o.Wait, "wait", o.Wait, "Wait until every workload reaches the state the verb leads to")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", o.Timeout, "How long the command, with its --wait, may take in all for every ID, e.g. 30s or 2m")
	cmd.Flags().BoolVar(&o.All, "all", o.All, "Act on every recorded workload (but deleted ones) that --state, --kind, -n, --runtime and --context select")
	o.Selection.addFlags(cmd)
	return cmd
}

// Validate checks the arguments without any I/O.
func (o *LifecycleOptions) Validate() error {
	selecting := o.All || o.Selector != ""
	switch {
	case selecting && len(o.args) > 0:
		return usageErrorf("%s: give IDs or select with -l/--all, not both (got %s)", o.verb.name, strings.Join(o.args, " "))
	case !selecting && (len(o.States) > 0 || o.Kind != ""):
		return usageErrorf("%s: --state and --kind narrow a selection: add --all or -l", o.verb.name)
	case len(o.args) == 0 && !selecting:
		return usageErrorf("%s needs at least one ID, -l SELECTOR or --all (see 'kubectl gobrave %s --help')", o.verb.name, o.verb.name)
	}
	if o.Timeout <= 0 {
		return usageErrorf("--timeout %s must be positive", o.Timeout)
	}
	if err := o.Selection.validate(); err != nil {
		return err
	}
	for _, a := range o.args {
		if err := ParseRef(a); err != nil {
			return err
		}
	}
	return nil
}

// Run applies the verb to every ID; one failure does not stop the others.
func (o *LifecycleOptions) Run(ctx context.Context) error {
	deadline := time.Now().Add(o.Timeout)
	var (
		st  *store.Store
		ws  []store.Workload
		err error
	)
	if o.All || o.Selector != "" {
		st, ws, err = o.selected(ctx)
		if err != nil {
			return err
		}
		if len(ws) == 0 {
			fmt.Fprintf(o.ErrOut, "No workloads matched: nothing to %s.\n", o.verb.name)
			return nil
		}
	} else {
		st, ws, err = o.f.resolveAll(ctx, o.args)
		if st == nil || ExitCode(err) == ExitInvalid {
			// An ambiguous name is bad input: act on nothing.
			return err
		}
	}
	var (
		errs []error
		done []store.Workload
	)
	if err != nil {
		errs = append(errs, err)
	}
	for i, w := range ws {
		if time.Now().After(deadline) {
			// One --timeout for every ID: what is left is not attempted.
			var left []string
			for _, w := range ws[i:] {
				left = append(left, w.RuntimeID)
			}
			errs = append(errs, fmt.Errorf("%s: --timeout %s expired: not attempted: %s", o.verb.name, o.Timeout, strings.Join(left, ", ")))
			break
		}
		w, err := o.apply(ctx, st, w)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		done = append(done, w)
		fmt.Fprintf(o.Out, "%s %s (%s)\n", ref(w.Kind, w.Name), o.verb.past, w.RuntimeID)
	}
	if o.Wait && len(done) > 0 {
		left := time.Until(deadline)
		if left <= 0 {
			left = time.Millisecond
		}
		wctx, cancel := context.WithTimeout(ctx, left)
		defer cancel()
		wait := o.f.waitFor
		if o.verb.waitFor == ConditionDeleted {
			wait = func(ctx context.Context, st *store.Store, ws []store.Workload, _ Condition, timeout time.Duration, _ io.Writer) error {
				return o.f.waitGone(ctx, st, ws, timeout)
			}
		}
		if err := wait(wctx, st, done, o.verb.waitFor, o.Timeout, o.ErrOut); err != nil {
			errs = append(errs, err)
		}
	}
	if (o.All || o.Selector != "") && len(done) < len(ws) {
		fmt.Fprintf(o.ErrOut, "%s: %d of %d selected workloads %s, %d not (see the error)\n", o.verb.name, len(done), len(ws), o.verb.past, len(ws)-len(done))
	}
	return errors.Join(errs...)
}

// selected reads the records -l/--all select: every state but deleted
// unless --state is given.
func (o *LifecycleOptions) selected(ctx context.Context) (*store.Store, []store.Workload, error) {
	st, err := o.f.Store(ctx)
	if err != nil {
		return nil, nil, err
	}
	q, err := o.f.query(&o.Selection, true, false)
	if err != nil {
		return nil, nil, err
	}
	if len(q.States) == 0 {
		q.ExcludeStates = []store.State{store.StateDeleted}
	}
	ws, err := st.Select(ctx, q)
	return st, ws, err
}

func (o *LifecycleOptions) apply(ctx context.Context, st *store.Store, w store.Workload) (store.Workload, error) {
	e, err := o.f.engine(ctx)
	if err != nil {
		return w, err
	}
	res, err := e.Apply(ctx, w, o.verb.event)
	return res.Workload, err
}
