package cmd

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/metadata"

	"github.com/gobrave/kubectl-gobrave/pkg/monitor"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// eventPrinter prints recorded events as lines or JSON lines; the monitor
// calls it from one goroutine per context, so it locks.
type eventPrinter struct {
	mu   sync.Mutex
	w    io.Writer
	json bool
}

func (p *eventPrinter) print(e store.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v := eventViewOf(e)
	if p.json {
		b, _ := json.Marshal(v)
		fmt.Fprintf(p.w, "%s\n", b)
		return
	}
	fmt.Fprintf(p.w, "%s  %s  %s  %s\n", v.Time.Local().Format(time.RFC3339), escapeTerminal(v.RuntimeID), escapeTerminal(v.Type), escapeTerminal(v.Message))
}

// MonitorOptions are the options of monitor.
type MonitorOptions struct {
	genericiooptions.IOStreams
	f      *Factory
	All    bool
	Follow bool
	Output string
	args   []string
}

// NewCmdMonitor watches workloads in the foreground and records their events.
func NewCmdMonitor(f *Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &MonitorOptions{IOStreams: streams, f: f}
	cmd := &cobra.Command{
		Use:   "monitor [ID...] [--all]",
		Short: "Watch workloads in the foreground, recording and printing every event",
		Long: `Watch workloads through shared informers (one list and one watch per kind, whatever the number
of IDs) and record every event in the state database; each recorded event is printed as a line,
or a JSON line with -o json. It exits when every monitored ID is terminal, or keeps running with
--follow until interrupted (SIGINT or SIGTERM), recording what is pending on the way out.
With --all --follow it also picks up the IDs created, started again or resumed while it runs
(by any process: it reads the database's new events every second).`,
		Example: `  kubectl gobrave monitor web k8s-default|job|import
  kubectl gobrave monitor --all --follow -o json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.args = args
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().BoolVar(&o.All, "all", o.All, "Monitor every non-terminal ID in the state database")
	cmd.Flags().BoolVar(&o.Follow, "follow", o.Follow, "Keep running after every monitored ID is terminal, until interrupted")
	cmd.Flags().StringVarP(&o.Output, "output", "o", o.Output, "Output format: json prints JSON lines")
	return cmd
}

// Validate checks flags and IDs without I/O.
func (o *MonitorOptions) Validate() error {
	if err := validateOutput(o.Output, "", "json"); err != nil {
		return err
	}
	if o.All == (len(o.args) > 0) {
		return usageErrorf("give IDs or --all, not both and not neither (see 'kubectl gobrave monitor --help')")
	}
	for _, a := range o.args {
		if err := ParseRef(a); err != nil {
			return err
		}
	}
	return nil
}

// Run monitors.
func (o *MonitorOptions) Run(ctx context.Context) error {
	var (
		st  *store.Store
		ws  []store.Workload
		err error
	)
	p := &eventPrinter{w: o.Out, json: o.Output == "json"}
	defer startHeapProfile()()
	if o.All && o.Follow {
		if st, err = o.f.FollowingStore(ctx); err != nil {
			return err
		}
		// Picks up the IDs created (or started again) while it runs.
		_, _, err = o.f.runMonitorsDiscovering(ctx, st, monitor.Options{Follow: true, OnEvent: p.print})
		if err != nil && ctx.Err() != nil {
			return nil // interrupted: the monitors flushed what was pending
		}
		return err
	}
	if o.All {
		if st, err = o.f.Store(ctx); err != nil {
			return err
		}
		var n int
		_, n, err = o.f.runMonitorsPaged(ctx, st, monitor.Options{OnEvent: p.print})
		if err == nil && n == 0 {
			fmt.Fprintln(o.ErrOut, "Nothing to monitor: every ID is terminal.")
		}
		if err != nil && ctx.Err() != nil {
			return nil // interrupted: the monitor flushed what was pending
		}
		return err
	}
	if st, ws, err = o.f.resolveAll(ctx, o.args); err != nil {
		return err
	}
	var live []store.Workload
	for _, w := range ws {
		if !w.State.Terminal() {
			live = append(live, w)
		}
	}
	if len(live) == 0 {
		fmt.Fprintln(o.ErrOut, "Nothing to monitor: every ID is terminal.")
		if o.Follow {
			<-ctx.Done() // --follow keeps running until interrupted
		}
		return nil
	}
	_, err = o.f.runMonitors(ctx, st, live, monitor.Options{Follow: o.Follow, OnEvent: p.print})
	if err != nil && ctx.Err() != nil {
		return nil // interrupted: the monitor flushed what was pending
	}
	return err
}

// WaitOptions are the options of wait.
type WaitOptions struct {
	genericiooptions.IOStreams
	f       *Factory
	For     string
	Timeout time.Duration
	// All and Selection wait for the records they select instead of IDs.
	All bool
	Selection
	args []string
}

// NewCmdWait blocks until workloads meet a condition.
func NewCmdWait(f *Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &WaitOptions{IOStreams: streams, f: f, Timeout: 30 * time.Second}
	var names []string
	for _, c := range Conditions {
		names = append(names, string(c))
	}
	cmd := &cobra.Command{
		Use:   "wait (ID... | -l SELECTOR | --all) --for=" + strings.Join(names, "|"),
		Short: "Wait until workloads have started, exited, paused, failed, been deleted or reached any terminal state",
		Long: `Wait until every ID meets the condition, under one overall --timeout. Exit code 0 when all do;
1 on timeout, naming those that did not; 1 at once when an ID reaches a different terminal state
(waiting for started and it failed). A job that finished with exit code 0 counts as started.
--for=deleted waits, like 'kubectl wait --for=delete', until the object is gone from the cluster
(finalizers and all), not only until the record says deleted.
paused is met by a suspended job (state paused) and by a deployment that pause scaled to 0
(exited); paused is not terminal, so a paused job is still waited on for started or exited.`,
		Example: `  kubectl gobrave wait web --for=started --timeout=2m
  kubectl gobrave wait job/a job/b job/c --for=exited --timeout=10m
  kubectl gobrave wait -l team=data --kind job --for=terminal --timeout=1h`,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.args = args
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&o.For, "for", o.For, "Condition: "+strings.Join(names, ", "))
	cmd.Flags().DurationVar(&o.Timeout, "timeout", o.Timeout, "How long to wait in all")
	cmd.Flags().BoolVar(&o.All, "all", o.All, "Wait for every recorded workload (but deleted ones) that --state, --kind, -n, --runtime and --context select")
	o.Selection.addFlags(cmd)
	return cmd
}

// Validate checks flags and IDs without I/O.
func (o *WaitOptions) Validate() error {
	selecting := o.All || o.Selector != ""
	switch {
	case selecting && len(o.args) > 0:
		return usageErrorf("wait: give IDs or select with -l/--all, not both (got %s)", strings.Join(o.args, " "))
	case !selecting && (len(o.States) > 0 || o.Kind != ""):
		return usageErrorf("wait: --state and --kind narrow a selection: add --all or -l")
	case len(o.args) == 0 && !selecting:
		return usageErrorf("wait needs at least one ID, -l SELECTOR or --all (see 'kubectl gobrave wait --help')")
	}
	if err := o.Selection.validate(); err != nil {
		return err
	}
	ok := false
	for _, c := range Conditions {
		ok = ok || string(c) == o.For
	}
	if !ok {
		return usageErrorf("--for %q: use started, exited, paused, failed, deleted or terminal", o.For)
	}
	if o.Timeout <= 0 {
		return usageErrorf("--timeout %s must be positive", o.Timeout)
	}
	for _, a := range o.args {
		if err := ParseRef(a); err != nil {
			return err
		}
	}
	return nil
}

// Run waits.
func (o *WaitOptions) Run(ctx context.Context) error {
	var (
		st  *store.Store
		ws  []store.Workload
		err error
	)
	if o.All || o.Selector != "" {
		sel := &LifecycleOptions{f: o.f, Selection: o.Selection}
		if st, ws, err = sel.selected(ctx); err != nil {
			return err
		}
		if len(ws) == 0 {
			fmt.Fprintln(o.ErrOut, "No workloads matched: nothing to wait for.")
			return nil
		}
	} else if st, ws, err = o.f.resolveAll(ctx, o.args); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	if err := o.f.waitFor(wctx, st, ws, Condition(o.For), o.Timeout, o.ErrOut); err != nil {
		return err
	}
	if Condition(o.For) == ConditionDeleted {
		// Like kubectl wait --for=delete: the record says deleted at the
		// request; the condition is the object gone from the cluster.
		if err := o.f.waitGone(wctx, st, ws, o.Timeout); err != nil {
			return err
		}
	}
	for _, w := range ws {
		fmt.Fprintf(o.Out, "%s condition met (%s)\n", ref(w.Kind, w.Name), o.For)
	}
	return nil
}

// RecoverOptions are the options of recover.
type RecoverOptions struct {
	genericiooptions.IOStreams
	f      *Factory
	Once   bool
	Output string
}

// NewCmdRecover reattaches monitors to every non-terminal ID.
func NewCmdRecover(f *Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &RecoverOptions{IOStreams: streams, f: f}
	cmd := &cobra.Command{
		Use:   "recover",
		Short: "Reattach monitors to every non-terminal ID, after a restart",
		Long: `Reattach monitors to every non-terminal ID in the state database, across runtimes and contexts.
A reconcile pass from the informer caches first records what changed while nothing watched
(including workloads deleted meanwhile); then it keeps monitoring like 'monitor --all --follow',
picking up the IDs created, started again or resumed while it runs.
--once does only the reconcile pass (for runbooks and cron) and prints a summary.`,
		Example: `  # after a laptop restart
  kubectl gobrave recover --once
  # keep monitoring in the foreground
  kubectl gobrave recover`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateOutput(o.Output, "", "json"); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().BoolVar(&o.Once, "once", o.Once, "Only the reconcile pass, then print the summary and exit")
	cmd.Flags().StringVarP(&o.Output, "output", "o", o.Output, "Output format: json prints events as JSON lines and the summary as JSON")
	return cmd
}

// RecoverSummary is the summary recover prints.
type RecoverSummary struct {
	Reattached int `json:"reattached"`
	Changed    int `json:"changed"`
	Terminal   int `json:"terminal"`
}

// Run recovers.
func (o *RecoverOptions) Run(ctx context.Context) error {
	open := o.f.Store
	if o.Once {
		open = o.f.RecoverStore
	}
	st, err := open(ctx)
	if err != nil {
		return err
	}
	out := o.Out
	if o.Once {
		// The event lines of a pass in 64 KiB writes, not one write (a
		// system call) per event: 100,000 of them at N = 100,000.
		bw := bufio.NewWriterSize(o.Out, 64<<10)
		defer bw.Flush()
		out = bw
	}
	p := &eventPrinter{w: out, json: o.Output == "json"}
	// First the requests whose process died before they reached the
	// cluster, which no monitor can tell (one stream per namespace and
	// kind of such records).
	e, err := o.f.engine(ctx)
	if err != nil {
		return err
	}
	healed, err := e.RecoverAll(ctx)
	for _, ev := range healed {
		p.print(ev)
	}
	if err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	at := time.Now()
	scopes, err := st.LiveScopes(ctx)
	if err != nil {
		return err
	}
	n := 0
	for _, sc := range scopes {
		n += sc.Count
	}
	var sum monitor.Summary
	bar := newProgress(o.ErrOut)
	if o.Once {
		bar.update("reconciling %d IDs with the cluster", n)
	} else if bar.on {
		fmt.Fprintf(o.ErrOut, "monitoring %d IDs; press Ctrl-C to stop\n", n)
	}
	switch {
	case !o.Once:
		// Follows until interrupted, picking up the IDs created meanwhile.
		sum, _, err = o.f.runMonitorsDiscovering(ctx, st, monitor.Options{Follow: true, OnEvent: p.print})
		if err != nil && ctx.Err() == nil {
			return err
		}
	case n > 0:
		sum, err = o.f.reconcileAll(ctx, st, scopes, at, "", p.print)
		if err != nil && ctx.Err() == nil {
			return err
		}
	}
	bar.done()
	s := RecoverSummary{Reattached: sum.Reattached, Changed: sum.Changed + len(healed), Terminal: sum.Terminal}
	if o.Output == "json" {
		return printData(out, "json", s)
	}
	fmt.Fprintf(out, "reattached %d, changed %d, now terminal %d\n", s.Reattached, s.Changed, s.Terminal)
	return nil
}

// reconcileAll is recover --once and ps --refresh: one monitor.Reconcile per
// kubeconfig context over the non-terminal records of its runtimes (scopes,
// from store.LiveScopes read at at: the pass begins then, and does not read
// them again), which it reads page by page; namespace, when set, keeps one
// namespace's records.
func (f *Factory) reconcileAll(ctx context.Context, st *store.Store, scopes []store.Scope, at time.Time, namespace string, onEvent func(store.Event)) (monitor.Summary, error) {
	tuneGCForPass()
	byCtx := map[string][]string{}
	for _, sc := range scopes {
		c, err := f.ContextFor(sc.Runtime)
		if err != nil {
			return monitor.Summary{}, err
		}
		if !slices.Contains(byCtx[c], sc.Runtime) {
			byCtx[c] = append(byCtx[c], sc.Runtime)
		}
	}
	own := owner()
	var total monitor.Summary
	for _, c := range slices.Sorted(maps.Keys(byCtx)) {
		rts := byCtx[c]
		client, err := f.Client(rts[0])
		if err != nil {
			return total, err
		}
		cur, err := f.ClusterID(rts[0])
		if err != nil {
			return total, err
		}
		var md metadata.Interface
		if f.NewClient == nil {
			rc, err := f.RESTConfig(c)
			if err != nil {
				return total, err
			}
			if md, err = metadata.NewForConfig(rc); err != nil {
				return total, fmt.Errorf("build metadata client for context %q: %w", c, err)
			}
		}
		o := own
		o.ID = own.ID + "/" + c
		sum, err := monitor.Reconcile(ctx, client, st, monitor.ReconcileOptions{
			Owner: o, SyncTimeout: f.requestTimeout(), Runtimes: rts, Namespace: namespace, Cluster: cur, Metadata: md, OnEvent: onEvent,
			Scopes: scopes, ScopesAt: at,
			OnSkip: func(id, rec string) {
				fmt.Fprintf(f.warnings(), "warning: %s was made on %s, its runtime now points at %s: not monitored (switch back with --context)\n", id, rec, cur)
			},
		})
		total.Reattached += sum.Reattached
		total.Changed += sum.Changed
		total.Terminal += sum.Terminal
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// runMonitorsPaged is runMonitors over every non-terminal record, for
// `monitor --all` without --follow: the records are read page by page
// (ScanLive: IDs and states, no specs) and not kept, as
// runMonitorsDiscovering reads them, so that the listing's memory does not
// grow with their number (the monitors keep what they need of each ID).
// The monitors start once every page is added: one that does not follow
// ends when its IDs are terminal. It returns the number of records given.
func (f *Factory) runMonitorsPaged(ctx context.Context, st *store.Store, opts monitor.Options) (monitor.Summary, int, error) {
	set := f.newMonitorSet(ctx, st, opts)
	set.hold = true
	n := 0
	err := st.ScanLive(ctx, store.ScanFilter{}, liveScanPage, func(page []store.LiveRecord) error {
		ws := make([]store.Workload, len(page))
		for i := range page {
			ws[i] = page[i].Workload
		}
		n += len(ws)
		return set.add(ws)
	})
	if err != nil || n == 0 {
		set.stop()
		return monitor.Summary{}, n, err
	}
	set.release()
	sum, err := set.wait()
	return sum, n, err
}

// release starts the monitors add held.
func (s *monitorSet) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold = false
	for _, m := range s.held {
		s.start(m)
	}
	s.held = nil
}
