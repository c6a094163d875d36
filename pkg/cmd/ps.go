package cmd

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/gobrave/kubectl-gobrave/pkg/monitor"
	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// PsOptions are the options of ps.
type PsOptions struct {
	genericiooptions.IOStreams
	f             *Factory
	All           bool
	AllNamespaces bool
	States        []string
	Output        string
	Refresh       bool
	now           func() time.Time
}

// NewCmdPs lists the recorded workloads.
func NewCmdPs(f *Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &PsOptions{IOStreams: streams, f: f, now: time.Now}
	cmd := &cobra.Command{
		Use:     "ps",
		Aliases: []string{"list"},
		Short:   "List recorded workloads (non-terminal ones unless -a)",
		Long: `List the workloads recorded in the state database, sorted by namespace, kind and name.
Without -a only non-terminal workloads are shown (created, starting, running, stopping).
-n limits to one namespace; without -n or -A every namespace is listed. --refresh runs one
reconcile pass against the cluster first (like 'recover --once').`,
		Example: `  kubectl gobrave ps
  kubectl gobrave ps -a --state failed -o wide
  kubectl gobrave ps -n team-a --runtime k3s -o json
  kubectl gobrave ps -o name`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().BoolVarP(&o.All, "all", "a", o.All, "Include terminal workloads (exited, failed, deleted)")
	cmd.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", o.AllNamespaces, "List every namespace (the default unless -n is given)")
	cmd.Flags().StringSliceVar(&o.States, "state", o.States, "Only these states: created, starting, running, paused, stopping, exited, failed, deleted")
	cmd.Flags().StringVarP(&o.Output, "output", "o", o.Output, "Output format: wide, json, yaml or name")
	cmd.Flags().BoolVar(&o.Refresh, "refresh", o.Refresh, "Reconcile with the cluster before listing")
	return cmd
}

var allStates = []store.State{store.StateCreated, store.StateStarting, store.StateRunning, store.StatePaused, store.StateStopping, store.StateExited, store.StateFailed, store.StateDeleted}

// Validate checks flags without I/O.
func (o *PsOptions) Validate() error {
	if err := validateOutput(o.Output, "", "wide", "json", "yaml", "name"); err != nil {
		return err
	}
	for _, s := range o.States {
		ok := false
		for _, known := range allStates {
			ok = ok || string(known) == s
		}
		if !ok {
			return usageErrorf("--state %q is not a state (use created, starting, running, paused, stopping, exited, failed or deleted)", s)
		}
	}
	if o.f.RuntimeFlag != "" && !runtimeid.IsRuntime(o.f.RuntimeFlag) {
		return usageErrorf("--runtime %q: use k8s or k3s", o.f.RuntimeFlag)
	}
	return nil
}

// Run lists.
func (o *PsOptions) Run(ctx context.Context) error {
	st, err := o.f.Store(ctx)
	if err != nil {
		return err
	}
	filter := store.Filter{All: o.All, Runtime: o.f.RuntimeFlag, NoSpec: true}
	for _, s := range o.States {
		filter.States = append(filter.States, store.State(s))
	}
	if !o.AllNamespaces && o.f.ConfigFlags.Namespace != nil {
		filter.Namespace = *o.f.ConfigFlags.Namespace
	}
	if o.Refresh {
		live, err := st.List(ctx, store.Filter{Runtime: filter.Runtime, Namespace: filter.Namespace})
		if err != nil {
			return err
		}
		if len(live) > 0 {
			if _, err := o.f.runMonitors(ctx, st, live, monitor.Options{Once: true}); err != nil {
				return fmt.Errorf("refresh: %w", err)
			}
		}
	}
	ws, err := st.List(ctx, filter)
	if err != nil {
		return err
	}
	switch o.Output {
	case "json", "yaml":
		views := make([]WorkloadView, 0, len(ws))
		for _, w := range ws {
			views = append(views, viewOf(w))
		}
		return printData(o.Out, o.Output, views)
	case "name":
		for _, w := range ws {
			fmt.Fprintln(o.Out, w.RuntimeID)
		}
		return nil
	}
	if len(ws) == 0 {
		fmt.Fprintln(o.ErrOut, "No workloads found.")
		return nil
	}
	now := o.now()
	color := o.f.colorEnabled(o.Out)
	state := func(s store.State) string {
		if color {
			return stateColor(s)
		}
		return escapeTerminal(string(s))
	}
	tw := printers.GetNewTabWriter(o.Out)
	if o.Output == "wide" {
		fmt.Fprintln(tw, "RUNTIME ID\tKIND\tSTATE\tAGE\tRUNTIME\tNAMESPACE\tNAME\tUID\tUPDATED\tREASON\tEXIT CODE\tMESSAGE")
	} else {
		fmt.Fprintln(tw, "RUNTIME ID\tKIND\tSTATE\tAGE")
	}
	for _, w := range ws {
		if o.Output == "wide" {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", escapeTerminal(w.RuntimeID), escapeTerminal(w.Kind), state(w.State), age(w.CreatedAt, now),
				escapeTerminal(w.Runtime), escapeTerminal(w.Namespace), escapeTerminal(w.Name), escapeTerminal(orNone(w.UID)),
				age(w.UpdatedAt, now), escapeTerminal(orNone(w.Reason)), exitCodeText(w.ExitCode), escapeTerminal(orNone(w.Message)))
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", escapeTerminal(w.RuntimeID), escapeTerminal(w.Kind), state(w.State), age(w.CreatedAt, now))
	}
	return tw.Flush()
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
