package cmd

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// PruneOptions are the options of prune.
type PruneOptions struct {
	genericiooptions.IOStreams
	f         *Factory
	OlderThan string
	DryRun    bool
	Output    string

	olderThan time.Duration
	now       func() time.Time
}

// NewCmdPrune removes the records of deleted workloads.
func NewCmdPrune(f *Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &PruneOptions{IOStreams: streams, f: f, now: time.Now}
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "Remove the records and history of deleted workloads from the state database",
		Long: `Remove from the state database the records in state deleted, with their event history, as
'docker container prune' removes stopped containers. --older-than keeps those deleted more recently
(by the record's updatedAt: when it became deleted); -n and --runtime keep the other namespaces
and runtimes (without -n, every namespace). The cluster is never asked or changed, and
a record in any other state is never removed, whatever runs at the same time (a monitor, a create
of the same name): the selection and the removal are one transaction of the database.
Prints the runtime ID of each removed record and the count (on stderr).`,
		Example: `  kubectl gobrave prune
  kubectl gobrave prune --older-than 7d --dry-run
  kubectl gobrave prune --older-than 36h -n team-a`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&o.OlderThan, "older-than", o.OlderThan, "Only records deleted at least this long ago: a Go duration (36h, 90m) or days (7d, 1d12h)")
	cmd.Flags().BoolVar(&o.DryRun, "dry-run", o.DryRun, "List what would be removed; remove nothing")
	cmd.Flags().StringVarP(&o.Output, "output", "o", o.Output, "Output format: name (runtime IDs only)")
	return cmd
}

// parseAge reads a Go duration or one with a leading count of days (7d,
// 1d12h).
func parseAge(s string) (time.Duration, error) {
	days, rest, ok := strings.Cut(s, "d")
	var d time.Duration
	if ok {
		n, err := strconv.ParseUint(days, 10, 32)
		if err != nil {
			return 0, fmt.Errorf("%q is not a number of days", days)
		}
		d = time.Duration(n) * 24 * time.Hour
		if rest == "" {
			return d, nil
		}
		s = rest
	}
	r, err := time.ParseDuration(s)
	if err != nil {
		return 0, err
	}
	if r < 0 {
		return 0, fmt.Errorf("negative")
	}
	return d + r, nil
}

// Validate checks the flags without I/O.
func (o *PruneOptions) Validate() error {
	if err := validateOutput(o.Output, "", "name"); err != nil {
		return err
	}
	if o.OlderThan != "" {
		d, err := parseAge(o.OlderThan)
		if err != nil {
			return usageErrorf("--older-than %q: %v (use a duration such as 7d, 36h or 90m)", o.OlderThan, err)
		}
		o.olderThan = d
	}
	return nil
}

// Run prunes.
func (o *PruneOptions) Run(ctx context.Context) error {
	st, err := o.f.Store(ctx)
	if err != nil {
		return err
	}
	pf := store.PruneFilter{DryRun: o.DryRun, Runtime: o.f.RuntimeFlag}
	if o.f.ConfigFlags.Namespace != nil {
		pf.Namespace = *o.f.ConfigFlags.Namespace
	}
	if o.OlderThan != "" {
		pf.Before = o.now().Add(-o.olderThan)
	}
	pruned, err := st.Prune(ctx, pf)
	if err != nil {
		return err
	}
	events := 0
	now := o.now()
	for _, p := range pruned {
		events += p.Events
		switch {
		case o.Output == "name":
			fmt.Fprintln(o.Out, p.RuntimeID)
		case o.DryRun:
			fmt.Fprintf(o.Out, "%s would be pruned (deleted %s ago, %d events)\n", escapeTerminal(p.RuntimeID), age(p.DeletedAt, now), p.Events)
		default:
			fmt.Fprintf(o.Out, "%s pruned\n", escapeTerminal(p.RuntimeID))
		}
	}
	verb := "pruned"
	if o.DryRun {
		verb = "would prune"
	}
	fmt.Fprintf(o.ErrOut, "%s %d deleted records (%d events)\n", verb, len(pruned), events)
	return nil
}
