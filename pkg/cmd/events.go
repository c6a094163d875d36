package cmd

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
)

// EventsOptions are the options of events.
type EventsOptions struct {
	genericiooptions.IOStreams
	f *Factory
	printFlags
	args []string
	tmpl *objPrinter
}

// NewCmdEvents prints the recorded history of workloads.
func NewCmdEvents(f *Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &EventsOptions{IOStreams: streams, f: f}
	cmd := &cobra.Command{
		Use:   "events ID [ID...]",
		Short: "Show the recorded history of workloads, oldest first",
		Long: `Show the event history of one or more workloads from the state database, oldest first:
the verbs' requests (Created, StartRequested, StopRequested, DeleteRequested ...) and what the
monitor observed (ContainerStarted, ContainerExited, ContainerFailed, ContainerDeleted, and
ContainerWaiting when the newest pod waits with a reason such as ImagePullBackOff), with their
machine-readable reason and exit code. Each
event names the Kubernetes object UID it is about, so a workload deleted and created again under
the same name keeps its old history apart.`,
		Example: `  kubectl gobrave events web
  kubectl gobrave events k8s-default|job|import -o json
  kubectl gobrave events web -o jsonpath='{.items[-1:].type}'
  kubectl gobrave events web --no-headers -o custom-columns=TYPE:.type,REASON:.reason`,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.args = args
			if len(args) == 0 {
				return usageErrorf("events needs at least one ID (see 'kubectl gobrave events --help')")
			}
			if err := validateOutputs(o.Output, "", "json", "yaml"); err != nil {
				return err
			}
			for _, a := range args {
				if err := ParseRef(a); err != nil {
					return err
				}
			}
			if isTemplate(o.Output) {
				p, err := newObjPrinter(o.Output)
				if err != nil {
					return err
				}
				o.tmpl = p
			}
			return o.Run(cmd.Context())
		},
	}
	o.printFlags.addFlags(cmd, "json, yaml", true)
	return cmd
}

// Run prints the events.
func (o *EventsOptions) Run(ctx context.Context) error {
	st, ws, err := o.f.resolveAll(ctx, o.args)
	if err != nil {
		return err
	}
	ids := make([]string, len(ws))
	for i, w := range ws {
		ids[i] = w.RuntimeID
	}
	evs, err := st.Events(ctx, ids...)
	if err != nil {
		return err
	}
	views := make([]EventView, 0, len(evs))
	for _, e := range evs {
		views = append(views, eventViewOf(e))
	}
	if o.SortBy != "" || o.tmpl != nil {
		objs := make([]map[string]any, len(views))
		for i, v := range views {
			if objs[i], err = toObject(v); err != nil {
				return err
			}
			objs[i]["\x00i"] = float64(i)
		}
		if o.SortBy != "" {
			if err := sortObjects(objs, o.SortBy); err != nil {
				return err
			}
			sorted := make([]EventView, len(views))
			for i, m := range objs {
				sorted[i] = views[int(m["\x00i"].(float64))]
				delete(m, "\x00i")
			}
			views = sorted
		}
		for _, m := range objs {
			delete(m, "\x00i")
		}
		if o.tmpl != nil {
			return o.tmpl.print(o.Out, listObject(objs), objs, o.NoHeaders)
		}
	}
	if o.Output != "" {
		return printData(o.Out, o.Output, views)
	}
	tw := printers.GetNewTabWriter(o.Out)
	if !o.NoHeaders {
		fmt.Fprintln(tw, "TIME\tRUNTIME ID\tTYPE\tREASON\tEXIT CODE\tUID\tMESSAGE")
	}
	for _, e := range views {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Time.Local().Format(time.RFC3339), escapeTerminal(e.RuntimeID), escapeTerminal(e.Type),
			escapeTerminal(orNone(e.Reason)), exitCodeText(e.ExitCode), escapeTerminal(orNone(e.UID)), escapeTerminal(orNone(e.Message)))
	}
	return tw.Flush()
}
