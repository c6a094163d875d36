package cmd

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// PsOptions are the options of ps.
type PsOptions struct {
	genericiooptions.IOStreams
	f   *Factory
	All bool
	Selection
	printFlags
	Refresh   bool
	Watch     bool
	WatchOnly bool
	// Poll is how often a watch reads the events table for changes.
	Poll time.Duration
	now  func() time.Time

	tmpl *objPrinter
}

// NewCmdPs lists the recorded workloads.
func NewCmdPs(f *Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &PsOptions{IOStreams: streams, f: f, now: time.Now, Poll: 200 * time.Millisecond}
	cmd := &cobra.Command{
		Use:     "ps",
		Aliases: []string{"list"},
		Short:   "List recorded workloads (non-terminal ones unless -a)",
		Long: `List the workloads recorded in the state database, sorted by namespace, kind and name.
Without -a only non-terminal workloads are shown (created, starting, running, paused, stopping).
-n limits to one namespace; without -n or -A every namespace is listed. -l selects by label
(the spec's labels, plus app=NAME and gobrave-workload=NAME), --kind by kind, --runtime by
runtime and --context to the records made on the cluster that context points at. --refresh runs
one reconcile pass against the cluster first (like 'recover --once').

-o takes kubectl's printers too: jsonpath, custom-columns and go-template (and their -file
forms) over the objects -o json prints; jsonpath and go-template see them as a kubectl List
({.items[*].runtimeID}). -w prints the table and then one row per change the monitors and
verbs of any process record, until interrupted (exit 0); it reads the state database only.`,
		Example: `  kubectl gobrave ps
  kubectl gobrave ps -a --state failed -o wide
  kubectl gobrave ps -n team-a --runtime k3s -o json
  kubectl gobrave ps -l team=data --kind job --show-labels
  kubectl gobrave ps -a -o jsonpath='{range .items[*]}{.runtimeID}{"\t"}{.exitCode}{"\n"}{end}'
  kubectl gobrave ps -o custom-columns=ID:.runtimeID,STATE:.state --sort-by=.updatedAt
  kubectl gobrave ps -w
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
	o.Selection.addFlags(cmd)
	o.printFlags.addFlags(cmd, "wide, json, yaml, name", true)
	cmd.Flags().BoolVar(&o.ShowLabels, "show-labels", o.ShowLabels, "Show each workload's labels as the last column of the table")
	cmd.Flags().BoolVar(&o.Refresh, "refresh", o.Refresh, "Reconcile with the cluster before listing")
	cmd.Flags().BoolVarP(&o.Watch, "watch", "w", o.Watch, "After listing, print a row for every recorded change until interrupted (with -o json, one object per line)")
	cmd.Flags().BoolVar(&o.WatchOnly, "watch-only", o.WatchOnly, "Print only the changes, not the listing first")
	return cmd
}

var allStates = []store.State{store.StateCreated, store.StateStarting, store.StateRunning, store.StatePaused, store.StateStopping, store.StateExited, store.StateFailed, store.StateDeleted}

// Validate checks flags without I/O (but for reading a template file).
func (o *PsOptions) Validate() error {
	if err := validateOutputs(o.Output, "", "wide", "json", "yaml", "name"); err != nil {
		return err
	}
	if err := o.Selection.validate(); err != nil {
		return err
	}
	if o.WatchOnly {
		o.Watch = true
	}
	if o.Watch {
		if o.Output == "yaml" || isTemplate(o.Output) {
			return usageErrorf("-w prints rows, -o name or -o json lines: -o %s cannot be watched", o.Output)
		}
		if o.SortBy != "" {
			return usageErrorf("--sort-by cannot be used with -w: changes are printed as they come")
		}
	}
	if isTemplate(o.Output) {
		p, err := newObjPrinter(o.Output)
		if err != nil {
			return err
		}
		o.tmpl = p
	}
	return nil
}

// Run lists.
func (o *PsOptions) Run(ctx context.Context) error {
	st, err := o.f.Store(ctx)
	if err != nil {
		return err
	}
	q, err := o.f.query(&o.Selection, o.All, o.ShowLabels)
	if err != nil {
		return err
	}
	if o.Refresh {
		if err := o.refresh(ctx, st, q); err != nil {
			return fmt.Errorf("refresh: %w", err)
		}
	}
	var since int64
	if o.Watch {
		// Changes recorded while the listing is read are printed after it.
		if since, err = st.LastEventSeq(ctx); err != nil {
			return err
		}
	}
	rp := o.newRowPrinter()
	if !o.WatchOnly {
		n, err := o.list(ctx, st, q, rp)
		if err != nil {
			return err
		}
		if n == 0 && !o.Watch && (o.Output == "" || o.Output == "wide") {
			fmt.Fprintln(o.ErrOut, "No workloads found.")
		}
	}
	if !o.Watch {
		return nil
	}
	return o.watch(ctx, st, q, since, rp)
}

// refresh is the reconcile pass of recover --once (Factory.reconcileAll)
// over the non-terminal records of q's runtime and namespace: a constant
// number of requests and memory for a batch of records, whatever their
// number.
func (o *PsOptions) refresh(ctx context.Context, st *store.Store, q store.Query) error {
	at := time.Now()
	scopes, err := st.LiveScopes(ctx)
	if err != nil {
		return err
	}
	var sel []store.Scope
	for _, sc := range scopes {
		if (q.Runtime == "" || sc.Runtime == q.Runtime) && (q.Namespace == "" || sc.Namespace == q.Namespace) {
			sel = append(sel, sc)
		}
	}
	if len(sel) == 0 {
		return nil
	}
	_, err = o.f.reconcileAll(ctx, st, sel, at, q.Namespace, nil)
	return err
}

// list prints what q selects: streamed from the store in its order, or, for
// --sort-by, yaml and the templates, collected first.
func (o *PsOptions) list(ctx context.Context, st *store.Store, q store.Query, rp *rowPrinter) (int, error) {
	if o.SortBy != "" || o.Output == "yaml" || o.tmpl != nil {
		ws, err := st.Select(ctx, q)
		if err != nil {
			return 0, err
		}
		return len(ws), o.printCollected(ws)
	}
	var (
		n   int
		jw  *jsonArrayWriter
		err error
	)
	if o.Output == "json" && !o.Watch {
		jw = newJSONArrayWriter(o.Out)
	}
	q.Fields = o.fields(q)
	for w, rerr := range st.Rows(ctx, q) {
		if rerr != nil {
			return n, rerr
		}
		n++
		if jw != nil {
			err = jw.add(viewOf(w))
		} else {
			err = rp.row(w)
		}
		if err != nil {
			return n, err
		}
	}
	if jw != nil {
		return n, jw.close()
	}
	return n, rp.flush()
}

// fields are what the streamed rows of list print (and q.Match reads): a
// table reads four columns of each record, not eighteen.
func (o *PsOptions) fields(q store.Query) store.Fields {
	var f store.Fields
	switch o.Output {
	case "name":
		f = store.FieldRuntimeID
	case "", "wide":
		f = store.FieldRuntimeID | store.FieldKind | store.FieldState | store.FieldCreated
		if o.Output == "wide" {
			f |= store.FieldPlace | store.FieldUID | store.FieldUpdated | store.FieldResult | store.FieldMessage
		}
		if o.ShowLabels {
			f |= store.FieldPlace | store.FieldSpec // workloadLabels
		}
	default: // json: viewOf
		return 0
	}
	if q.Match != nil {
		f |= store.FieldPlace | store.FieldSpec // workloadLabels
	}
	return f
}

// printCollected prints a whole listing: sorted by --sort-by, as yaml or
// through a template.
func (o *PsOptions) printCollected(ws []store.Workload) error {
	views := make([]WorkloadView, len(ws))
	for i, w := range ws {
		views[i] = viewOf(w)
	}
	if o.SortBy == "" && o.Output == "yaml" {
		return printData(o.Out, o.Output, views)
	}
	objs := make([]map[string]any, len(views))
	for i, v := range views {
		m, err := toObject(v)
		if err != nil {
			return err
		}
		objs[i] = m
	}
	if o.SortBy != "" {
		for i := range objs {
			objs[i]["\x00i"] = float64(i) // where it came from
		}
		if err := sortObjects(objs, o.SortBy); err != nil {
			return err
		}
		sorted := make([]store.Workload, len(ws))
		sortedViews := make([]WorkloadView, len(ws))
		for i, m := range objs {
			j := int(m["\x00i"].(float64))
			delete(m, "\x00i")
			sorted[i], sortedViews[i] = ws[j], views[j]
		}
		ws, views = sorted, sortedViews
	}
	switch {
	case o.tmpl != nil:
		return o.tmpl.print(o.Out, listObject(objs), objs, o.NoHeaders)
	case o.Output == "json" || o.Output == "yaml":
		return printData(o.Out, o.Output, views)
	}
	rp := o.newRowPrinter()
	for _, w := range ws {
		if err := rp.row(w); err != nil {
			return err
		}
	}
	return rp.flush()
}

// rowPrinter prints rows of the table, -o name or JSON lines (watch),
// flushing every chunk rows: kubectl's tabwriter remembers the column
// widths across flushes, so the first rows show at once and the columns
// stay aligned.
type rowPrinter struct {
	o      *PsOptions
	out    *bufio.Writer
	tw     interface{ Flush() error }
	w      io.Writer
	header bool
	rows   int
	chunk  int
	now    time.Time
	color  bool
	lines  bool   // -o json: one object per line
	line   []byte // the row being written, reused
	ages   map[int64]string
}

// age is age(t, rp.now), remembered by whole second: HumanDuration's text
// is a function of the whole seconds of the duration, and a listing's rows
// share few. A Sprintf a row was a tenth of a 100,000-row ps in Go.
func (rp *rowPrinter) age(t time.Time) string {
	if t.IsZero() {
		return age(t, rp.now)
	}
	s := int64(rp.now.Sub(t) / time.Second)
	if a, ok := rp.ages[s]; ok {
		return a
	}
	if rp.ages == nil || len(rp.ages) >= 4096 {
		rp.ages = make(map[int64]string)
	}
	a := age(t, rp.now)
	rp.ages[s] = a
	return a
}

// psChunk is kubectl's chunk size; psFirstChunk the rows flushed first.
const (
	psChunk      = 500
	psFirstChunk = 100
)

func (o *PsOptions) newRowPrinter() *rowPrinter {
	rp := &rowPrinter{o: o, out: bufio.NewWriterSize(o.Out, 64<<10), chunk: psChunk, now: o.now(), color: o.f.colorEnabled(o.Out)}
	rp.lines = o.Output == "json"
	if o.Output == "" || o.Output == "wide" {
		tw := printers.GetNewTabWriter(rp.out)
		rp.tw, rp.w = tw, tw
	} else {
		rp.w = rp.out
	}
	rp.header = !o.NoHeaders
	return rp
}

func (rp *rowPrinter) row(w store.Workload) error {
	o := rp.o
	switch {
	case o.Output == "name":
		rp.line = append(append(rp.line[:0], w.RuntimeID...), '\n')
		if _, err := rp.w.Write(rp.line); err != nil {
			return err
		}
	case rp.lines:
		b, err := jsonLine(viewOf(w))
		if err != nil {
			return err
		}
		rp.w.Write(b)
	default:
		if rp.header {
			rp.header = false
			h := "RUNTIME ID\tKIND\tSTATE\tAGE"
			if o.Output == "wide" {
				h += "\tRUNTIME\tNAMESPACE\tNAME\tUID\tUPDATED\tREASON\tEXIT CODE\tMESSAGE"
			}
			if o.ShowLabels {
				h += "\tLABELS"
			}
			fmt.Fprintln(rp.w, h)
		}
		// One line built in a buffer kept across rows, one write.
		b := rp.line[:0]
		state := escapeTerminal(string(w.State))
		if rp.color {
			state = stateColor(w.State)
		}
		b = append(b, escapeTerminal(w.RuntimeID)...)
		b = append(b, '\t')
		b = append(b, escapeTerminal(w.Kind)...)
		b = append(b, '\t')
		b = append(b, state...)
		b = append(b, '\t')
		b = append(b, rp.age(w.CreatedAt)...)
		if o.Output == "wide" {
			for _, c := range [...]string{escapeTerminal(w.Runtime), escapeTerminal(w.Namespace), escapeTerminal(w.Name), escapeTerminal(orNone(w.UID)),
				rp.age(w.UpdatedAt), escapeTerminal(orNone(w.Reason)), exitCodeText(w.ExitCode), escapeTerminal(orNone(w.Message))} {
				b = append(b, '\t')
				b = append(b, c...)
			}
		}
		if o.ShowLabels {
			b = append(b, '\t')
			b = append(b, escapeTerminal(labelsText(workloadLabels(w)))...)
		}
		b = append(b, '\n')
		rp.line = b
		if _, err := rp.w.Write(b); err != nil {
			return err
		}
	}
	rp.rows++
	// The first chunk is small, so that a terminal shows rows at once.
	if rp.rows == psFirstChunk || rp.rows%rp.chunk == 0 {
		return rp.flush()
	}
	return nil
}

// flush writes the rows so far.
func (rp *rowPrinter) flush() error {
	if rp.tw != nil {
		if err := rp.tw.Flush(); err != nil {
			return err
		}
	}
	return rp.out.Flush()
}

// labelsText is kubectl's LABELS column: k=v sorted by key, comma-separated.
func labelsText(l map[string]string) string {
	if len(l) == 0 {
		return "<none>"
	}
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		keys[i] = k + "=" + l[k]
	}
	return strings.Join(keys, ",")
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
