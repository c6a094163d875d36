package cmd

import (
	"context"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/gobrave/kubectl-gobrave/pkg/runtime"
	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
)

// LogsOptions are the options of logs.
type LogsOptions struct {
	genericiooptions.IOStreams
	f          *Factory
	Tail       int64
	Follow     bool
	Previous   bool
	Timestamps bool
	Since      time.Duration
	arg        string
}

// NewCmdLogs streams the logs of a workload's newest pod.
func NewCmdLogs(f *Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &LogsOptions{IOStreams: streams, f: f, Tail: runtime.DefaultTail}
	cmd := &cobra.Command{
		Use:   "logs ID",
		Short: "Print the logs of a workload's newest pod",
		Long: `Print the logs of the newest pod owned by a workload (the Job's, or a ReplicaSet's of the
Deployment; a pod that only carries the gobrave-workload label is never read).`,
		Example: `  kubectl gobrave logs web
  kubectl gobrave logs k8s-default|job|import --tail 50 --timestamps
  kubectl gobrave logs web -f --since 10m`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.arg = args[0]
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().Int64Var(&o.Tail, "tail", o.Tail, "Lines from the end of the log to show; -1 shows all")
	cmd.Flags().BoolVarP(&o.Follow, "follow", "f", o.Follow, "Keep streaming new lines")
	cmd.Flags().BoolVarP(&o.Previous, "previous", "p", o.Previous, "Logs of the previous container instance")
	cmd.Flags().BoolVar(&o.Timestamps, "timestamps", o.Timestamps, "Prefix each line with its RFC3339 timestamp")
	cmd.Flags().DurationVar(&o.Since, "since", o.Since, "Only lines newer than this, e.g. 5s, 2m or 3h")
	return cmd
}

// Validate checks the flags without I/O.
func (o *LogsOptions) Validate() error {
	if o.Tail < -1 {
		return usageErrorf("--tail %d: use -1 (all) or a number of lines", o.Tail)
	}
	if o.Since < 0 {
		return usageErrorf("--since %s must not be negative", o.Since)
	}
	return ParseRef(o.arg)
}

// Run streams the logs.
func (o *LogsOptions) Run(ctx context.Context) error {
	_, ws, err := o.f.resolveAll(ctx, []string{o.arg})
	if err != nil {
		return err
	}
	id, err := runtimeid.Parse(ws[0].RuntimeID)
	if err != nil {
		return err
	}
	client, err := o.f.Client(id.Runtime)
	if err != nil {
		return err
	}
	return runtime.New(client, id.Runtime).Logs(ctx, id, ws[0].UID, runtime.LogOptions{
		Tail: o.Tail, Follow: o.Follow, Previous: o.Previous, Timestamps: o.Timestamps, Since: o.Since,
	}, o.Out)
}
