package cmd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// RunOptions are the options of run: create, start, wait until started.
type RunOptions struct {
	CreateOptions
	Timeout time.Duration
	Detach  bool
}

// NewCmdRun creates, starts and waits for a workload.
func NewCmdRun(f *Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &RunOptions{CreateOptions: CreateOptions{IOStreams: streams, f: f}, Timeout: 5 * time.Minute}
	cmd := &cobra.Command{
		Use:   "run NAME --image IMAGE [flags] [-- COMMAND [ARGS...]]",
		Short: "Create and start a workload, and wait until it has started (a job: until it has finished)",
		Long: `Create a workload like 'create', start it, and wait, like a foreground 'docker run':
a service until it has started (reaching a terminal state instead is an error); a job until it
has finished: exit code 0 when it exited 0, 1 when it failed. With --detach a job is waited for
only until it has started. The runtime ID is printed on stdout.`,
		Example: `  kubectl gobrave run web --image nginx:1.27 --port 80 --expose
  kubectl gobrave run once --kind job --image busybox --timeout 1m -- echo hello
  kubectl gobrave run nightly --kind job --image busybox --detach -- sh -c 'sleep 3600'`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Complete(cmd, args); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			if o.Timeout <= 0 {
				return usageErrorf("--timeout %s must be positive", o.Timeout)
			}
			return o.Run(cmd.Context())
		},
	}
	o.flags.addFlags(cmd.Flags())
	cmd.Flags().StringVarP(&o.Output, "output", "o", o.Output, "Output format: json or yaml prints the record instead of the ID")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", o.Timeout, "How long to wait for the workload to start (a job: to finish)")
	cmd.Flags().BoolVarP(&o.Detach, "detach", "d", o.Detach, "For a job: return once it has started, not when it has finished")
	addDryRunFlag(cmd, &o.DryRun)
	return cmd
}

// Run creates, starts and waits.
func (o *RunOptions) Run(ctx context.Context) error {
	if o.dryRunning() {
		return o.dryRun(ctx) // what create would send; nothing starts
	}
	w, err := o.f.create(ctx, o.spec)
	if err != nil {
		return err
	}
	id, err := runtimeid.Parse(w.RuntimeID)
	if err != nil {
		return err
	}
	st, err := o.f.Store(ctx)
	if err != nil {
		return err
	}
	e, err := o.f.engine(ctx)
	if err != nil {
		return err
	}
	res, err := e.Apply(ctx, w, store.StartRequested)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	cur := res.Workload
	cond := ConditionStarted
	if id.Kind == runtimeid.KindJob && !o.Detach {
		cond = ConditionExited
	}
	if err := o.f.waitFor(wctx, st, []store.Workload{cur}, cond, o.Timeout, o.ErrOut); err != nil {
		if stuck := (*StuckError)(nil); errors.As(err, &stuck) {
			return err // names the ID already, and what to do
		}
		return fmt.Errorf("run %s: %w", id, err)
	}
	if o.Output == "json" || o.Output == "yaml" {
		cur, err := st.Get(ctx, w.RuntimeID)
		if err != nil {
			return err
		}
		return printData(o.Out, o.Output, viewOf(cur))
	}
	fmt.Fprintln(o.Out, w.RuntimeID)
	return nil
}
