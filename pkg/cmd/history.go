package cmd

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/gobrave/kubectl-gobrave/pkg/spec"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// HistoryOptions are the options of history.
type HistoryOptions struct {
	genericiooptions.IOStreams
	f        *Factory
	Output   string
	Revision int

	arg string
	now func() time.Time
}

// RevisionView is the stable JSON/YAML form of a revision.
type RevisionView struct {
	RuntimeID string `json:"runtimeID"`
	Revision  int    `json:"revision"`
	// Current is true for the record's spec now (the last revision).
	Current   bool               `json:"current"`
	CreatedAt time.Time          `json:"createdAt"`
	Change    string             `json:"change"`
	Spec      spec.ContainerSpec `json:"spec"`
}

// NewCmdHistory lists the specs a workload has had.
func NewCmdHistory(f *Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &HistoryOptions{IOStreams: streams, f: f, now: time.Now}
	cmd := &cobra.Command{
		Use:   "history ID",
		Short: "List the revisions of a workload's spec (what update changed)",
		Long: `List every spec a workload has had, oldest first: revision 1 is the spec it was created with,
each 'update' adds one. The last one is the current spec. --revision N prints that revision's spec
(as a spec file: 'kubectl gobrave history web --revision 1 -o yaml > web.yaml'); 'kubectl gobrave
update ID --to-revision N' makes it current again. It reads only the state database.

ID is a runtime ID (k8s-default|deployment|web), deployment/NAME or job/NAME, or a bare NAME
that exactly one record has.`,
		Example: `  kubectl gobrave history web
  kubectl gobrave history web -o json
  kubectl gobrave history web --revision 1 -o yaml`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("history needs one ID, got %d", len(args))
			}
			o.arg = args[0]
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVarP(&o.Output, "output", "o", o.Output, "Output format: json or yaml")
	cmd.Flags().IntVar(&o.Revision, "revision", o.Revision, "Print revision N's spec (yaml unless -o json)")
	return cmd
}

// Validate checks the flags without any I/O.
func (o *HistoryOptions) Validate() error {
	if err := ParseRef(o.arg); err != nil {
		return err
	}
	if o.Revision < 0 {
		return usageErrorf("--revision %d: revisions are numbered from 1", o.Revision)
	}
	return validateOutput(o.Output, "", "json", "yaml")
}

// Run prints the revisions.
func (o *HistoryOptions) Run(ctx context.Context) error {
	st, err := o.f.Store(ctx)
	if err != nil {
		return err
	}
	w, err := o.f.Resolve(ctx, st, o.arg)
	if err != nil {
		return err
	}
	revs, err := st.Revisions(ctx, w.RuntimeID)
	if err != nil {
		return err
	}
	views := make([]RevisionView, len(revs))
	for i, r := range revs {
		views[i] = revisionView(r, i == len(revs)-1)
	}
	if o.Revision > 0 {
		if o.Revision > len(revs) {
			return usageErrorf("--revision %d: %s has revisions 1 to %d", o.Revision, w.RuntimeID, len(revs))
		}
		format := o.Output
		if format == "" {
			format = "yaml"
		}
		return printData(o.Out, format, revs[o.Revision-1].Spec)
	}
	if o.Output != "" {
		return printData(o.Out, o.Output, views)
	}
	tw := printers.GetNewTabWriter(o.Out)
	fmt.Fprintln(tw, "REVISION\tCREATED\tCHANGE")
	now := o.now()
	for _, v := range views {
		change := escapeTerminal(v.Change)
		if v.Current {
			change += " (current)"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\n", v.Revision, age(v.CreatedAt, now), change)
	}
	return tw.Flush()
}

func revisionView(r store.Revision, current bool) RevisionView {
	return RevisionView{RuntimeID: r.RuntimeID, Revision: r.Revision, Current: current,
		CreatedAt: r.CreatedAt.UTC().Truncate(time.Second), Change: r.Change, Spec: r.Spec}
}
