package cmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/gobrave/kubectl-gobrave/pkg/runtime"
	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// DefaultMaxLogRequests is kubectl logs' default for --max-log-requests.
const DefaultMaxLogRequests = 5

// LogsOptions are the options of logs.
type LogsOptions struct {
	genericiooptions.IOStreams
	f              *Factory
	Tail           int64
	Follow         bool
	Previous       bool
	Timestamps     bool
	Since          time.Duration
	Selector       string
	Prefix         bool
	MaxLogRequests int
	Color          string
	args           []string
	selector       labels.Selector
}

// NewCmdLogs streams the logs of one or many workloads' newest pods.
func NewCmdLogs(f *Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &LogsOptions{IOStreams: streams, f: f, Tail: runtime.DefaultTail, MaxLogRequests: DefaultMaxLogRequests, Color: "auto"}
	cmd := &cobra.Command{
		Use:   "logs (ID... | -l KEY=VALUE)",
		Short: "Print the logs of workloads' newest pods",
		Long: `Print the logs of the newest pod owned by each workload (the Job's, or a ReplicaSet's of the
Deployment; a pod that only carries the gobrave-workload label is never read).

With several IDs or -l (a label selector over the workloads' recorded labels, in -n's
namespace if given, else in every namespace; deleted records are left out) the logs are
streamed together and every line starts with a [NAME] prefix (coloured on a terminal), as
stern and 'kubectl logs --prefix' do; --prefix adds it for one workload. Lines are written
whole, never mixed mid-line. With -f a workload whose pod is replaced (restart, rollout,
crash, a job's retry) is followed onto its new pod; following a job ends once it has
finished, following a deployment ends with Ctrl-C (exit 0).

Log text is passed through as the container wrote it, as kubectl logs does. Prefixed lines
are the exception: there the characters that could move the cursor back over the prefix or
rewrite the line (carriage return, backspace, escape sequences other than colours) are shown
as visible text, so a prefix always names the workload that wrote the line.`,
		Example: `  kubectl gobrave logs web
  kubectl gobrave logs k8s-default|job|import --tail 50 --timestamps
  kubectl gobrave logs web -f --since 10m
  kubectl gobrave logs web worker -f
  kubectl gobrave logs -l team=payments -f --max-log-requests 10`,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.args = args
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().Int64Var(&o.Tail, "tail", o.Tail, "Lines from the end of the log to show; -1 shows all")
	cmd.Flags().BoolVarP(&o.Follow, "follow", "f", o.Follow, "Keep streaming new lines, onto a workload's new pod when it is replaced")
	cmd.Flags().BoolVarP(&o.Previous, "previous", "p", o.Previous, "Logs of the previous container instance")
	cmd.Flags().BoolVar(&o.Timestamps, "timestamps", o.Timestamps, "Prefix each line with its RFC3339 timestamp")
	cmd.Flags().DurationVar(&o.Since, "since", o.Since, "Only lines newer than this, e.g. 5s, 2m or 3h")
	cmd.Flags().StringVarP(&o.Selector, "selector", "l", o.Selector, "Workloads whose labels match this selector, e.g. team=payments,tier!=web (labels are the spec's labels plus app=NAME and gobrave-workload=NAME, as ps -l)")
	cmd.Flags().BoolVar(&o.Prefix, "prefix", o.Prefix, "Start every line with [NAME] even for one workload")
	cmd.Flags().IntVar(&o.MaxLogRequests, "max-log-requests", o.MaxLogRequests, "With -f, the most workloads to follow at once")
	cmd.Flags().StringVar(&o.Color, "color", o.Color, "Colour the prefixes: auto (on a terminal without NO_COLOR), always or never")
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
	if o.MaxLogRequests < 1 {
		return usageErrorf("--max-log-requests %d: use a number of at least 1", o.MaxLogRequests)
	}
	switch o.Color {
	case "auto", "always", "never":
	default:
		return usageErrorf("--color %q: use auto, always or never", o.Color)
	}
	switch {
	case o.Selector != "" && len(o.args) > 0:
		return usageErrorf("pass IDs or -l %s, not both", o.Selector)
	case o.Selector == "" && len(o.args) == 0:
		return usageErrorf("name at least one workload, or select them with -l KEY=VALUE (see 'kubectl gobrave logs --help')")
	case o.Selector != "":
		sel, err := labels.Parse(o.Selector)
		if err != nil {
			return usageErrorf("-l %q: %v", o.Selector, err)
		}
		if sel.Empty() {
			return usageErrorf("-l %q selects every workload: name a label, e.g. -l app=web", o.Selector)
		}
		o.selector = sel
	}
	for _, a := range o.args {
		if err := ParseRef(a); err != nil {
			return err
		}
	}
	return nil
}

// Run streams the logs.
func (o *LogsOptions) Run(ctx context.Context) error {
	ws, err := o.workloads(ctx)
	if err != nil {
		return err
	}
	if o.Follow && len(ws) > o.MaxLogRequests {
		return usageErrorf("following %d workloads needs %d log streams, more than --max-log-requests %d: raise it with --max-log-requests %d or select fewer", len(ws), len(ws), o.MaxLogRequests, len(ws))
	}
	prefixed := o.Prefix || len(ws) > 1 || o.Selector != ""
	color := o.Color == "always" || (o.Color == "auto" && o.f.colorEnabled(o.Out))
	names := prefixNames(ws)
	out := &lineOut{w: o.Out}
	opts := runtime.LogOptions{Tail: o.Tail, Follow: o.Follow, Previous: o.Previous, Timestamps: o.Timestamps, Since: o.Since}
	warn := func(err error) { out.warn(o.ErrOut, FormatError(err)) }
	streamOne := func(i int) error {
		w := ws[i]
		id, err := runtimeid.Parse(w.RuntimeID)
		if err != nil {
			return err
		}
		client, err := o.f.Client(id.Runtime)
		if err != nil {
			return err
		}
		var prefix string
		if prefixed {
			prefix = "[" + names[i] + "] "
			if color {
				prefix = prefixColor(i) + "[" + names[i] + "]\x1b[0m "
			}
		}
		open := func(string) io.WriteCloser { return out.stream(prefix, prefixed) }
		rt := runtime.New(client, id.Runtime)
		rt.Warn = func(msg string) { out.warn(o.ErrOut, escapeTerminal(msg)) }
		return rt.FollowLogs(ctx, id, w.UID, opts, open, warn)
	}
	if !o.Follow {
		// One after another, in the order given (sorted for -l): each
		// workload's lines stay together.
		var errs []error
		for i := range ws {
			if err := streamOne(i); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for i := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := streamOne(i); err != nil && ctx.Err() == nil {
				if len(ws) > 1 {
					warn(err)
				}
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(ws) > 1 && len(errs) > 0 {
		return fmt.Errorf("%d of %d workloads' logs could not be followed (see the warnings above)", len(errs), len(ws))
	}
	return errors.Join(errs...)
}

// workloads resolves the IDs, or selects the records whose labels match -l.
// Any ID that does not resolve fails the command before a log is read.
func (o *LogsOptions) workloads(ctx context.Context) ([]store.Workload, error) {
	if o.selector == nil {
		_, ws, err := o.f.resolveAll(ctx, o.args)
		if err != nil {
			return nil, err
		}
		return ws, nil
	}
	ws, err := selectWorkloads(ctx, o.f, o.selector)
	if err != nil {
		return nil, err
	}
	if len(ws) == 0 {
		where := "any namespace"
		if o.f.ConfigFlags.Namespace != nil && *o.f.ConfigFlags.Namespace != "" {
			where = "namespace " + *o.f.ConfigFlags.Namespace
		}
		return nil, notFound(fmt.Sprintf("no workload in %s has labels matching -l %s (see 'kubectl gobrave ps -a')", where, o.selector))
	}
	return ws, nil
}

// selectWorkloads returns the records, deleted ones aside, whose labels
// (workloadLabels: the spec's plus app and gobrave-workload, as ps -l) match sel, in -n's namespace when it is given and --runtime's
// runtime when that is, sorted by runtime ID.
func selectWorkloads(ctx context.Context, f *Factory, sel labels.Selector) ([]store.Workload, error) {
	st, err := f.Store(ctx)
	if err != nil {
		return nil, err
	}
	filter := store.Filter{All: true, Runtime: f.RuntimeFlag}
	if f.ConfigFlags.Namespace != nil {
		filter.Namespace = *f.ConfigFlags.Namespace
	}
	all, err := st.List(ctx, filter)
	if err != nil {
		return nil, err
	}
	var out []store.Workload
	for _, w := range all {
		if w.State != store.StateDeleted && sel.Matches(labels.Set(workloadLabels(w))) {
			out = append(out, w)
		}
	}
	slices.SortFunc(out, func(a, b store.Workload) int { return strings.Compare(a.RuntimeID, b.RuntimeID) })
	return out, nil
}

// prefixNames names each workload in a prefix as briefly as stays
// unambiguous among ws: its name, else KIND/NAME, else the runtime ID.
func prefixNames(ws []store.Workload) []string {
	count := func(key func(store.Workload) string) map[string]int {
		n := map[string]int{}
		for _, w := range ws {
			n[key(w)]++
		}
		return n
	}
	byName := count(func(w store.Workload) string { return w.Name })
	byRef := count(func(w store.Workload) string { return w.Kind + "/" + w.Name })
	names := make([]string, len(ws))
	for i, w := range ws {
		switch {
		case byName[w.Name] == 1:
			names[i] = w.Name
		case byRef[w.Kind+"/"+w.Name] == 1:
			names[i] = w.Kind + "/" + w.Name
		default:
			names[i] = w.RuntimeID
		}
		// Names are DNS-1123 labels and runtime IDs are validated, but a
		// record is text from a file: never let it drive the terminal.
		names[i] = escapeTerminal(names[i])
	}
	return names
}

// prefixColors are stern's: bright cyan, green, magenta, yellow, blue, red.
var prefixColors = []string{"96", "92", "95", "93", "94", "91"}

func prefixColor(i int) string { return "\x1b[" + prefixColors[i%len(prefixColors)] + "m" }

// maxLine is the longest line written whole; a longer one is split into
// lines of this size, each with the prefix.
const maxLine = 1 << 20

// lineOut writes whole lines from many streams to one writer.
type lineOut struct {
	mu sync.Mutex
	w  io.Writer
}

// warn writes msg, already escaped, to w as one "warning:" line, never in
// the middle of a line of out's streams.
func (o *lineOut) warn(w io.Writer, msg string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Fprintf(w, "warning: %s\n", msg)
}

// stream returns a writer for one log stream: complete lines go out whole,
// each starting with prefix and, with sanitize, cleaned by prefixSafe; the
// last line, if it has no newline, goes out on Close (with a newline when
// prefixed).
func (o *lineOut) stream(prefix string, sanitize bool) io.WriteCloser {
	return &lineWriter{out: o, prefix: prefix, sanitize: sanitize}
}

type lineWriter struct {
	out      *lineOut
	prefix   string
	sanitize bool
	buf      []byte
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	var batch []byte
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 && len(l.buf) < maxLine {
			break
		}
		n := i + 1
		if i < 0 || n > maxLine {
			n = maxLine
		}
		batch = l.appendLine(batch, l.buf[:n])
		l.buf = l.buf[n:]
	}
	if len(l.buf) == 0 {
		l.buf = nil
	}
	return len(p), l.flush(batch)
}

func (l *lineWriter) Close() error {
	if len(l.buf) == 0 {
		return nil
	}
	// Without a prefix the log ends as the container wrote it, as
	// kubectl's does; a prefixed line is always ended.
	batch := l.buf
	if l.prefix != "" || l.sanitize {
		batch = l.appendLine(nil, l.buf)
	}
	l.buf = nil
	return l.flush(batch)
}

// appendLine appends prefix, line and a newline to dst.
func (l *lineWriter) appendLine(dst, line []byte) []byte {
	dst = append(dst, l.prefix...)
	line = bytes.TrimSuffix(line, []byte{'\n'})
	if l.sanitize {
		return append(prefixSafe(dst, line), '\n')
	}
	return append(append(dst, line...), '\n')
}

func (l *lineWriter) flush(batch []byte) error {
	if len(batch) == 0 {
		return nil
	}
	l.out.mu.Lock()
	defer l.out.mu.Unlock()
	_, err := l.out.w.Write(batch)
	return err
}

// prefixSafe appends line to dst so that it cannot overwrite or hide the
// prefix before it on a terminal: colour sequences (SGR, ESC [ digits m) and
// printable text pass unchanged, and a line that set a colour ends with a
// reset; a carriage return (but one that ends a CRLF line), backspace,
// other control characters, other escape sequences and C1 controls
// (U+0080–U+009F, or such a byte that is not UTF-8: CSI on an 8-bit
// terminal) become visible text as escapeTerminal shows them.
func prefixSafe(dst, line []byte) []byte {
	colored := false
	for i := 0; i < len(line); {
		c := line[i]
		switch {
		case c == 0x1b:
			if n := sgrLen(line[i:]); n > 0 {
				dst = append(dst, line[i:i+n]...)
				colored = true
				i += n
				continue
			}
			dst = append(dst, '^', '[')
			i++
		case c == '\r' && i == len(line)-1:
			dst = append(dst, c)
			i++
		case c == '\t':
			dst = append(dst, c)
			i++
		case c < 0x20 || c == 0x7f:
			dst = append(dst, escapeTerminal(string(c))...)
			i++
		case c < 0x80:
			dst = append(dst, c)
			i++
		default:
			r, size := utf8.DecodeRune(line[i:])
			if (r >= 0x80 && r <= 0x9f) || (size == 1 && c >= 0x80 && c <= 0x9f) {
				dst = append(dst, escapeTerminal(string(line[i:i+size]))...)
			} else {
				// Other text, and bytes that are not UTF-8 but cannot
				// act as controls, pass unchanged as kubectl's would.
				dst = append(dst, line[i:i+size]...)
			}
			i += size
		}
	}
	if colored {
		dst = append(dst, "\x1b[0m"...)
	}
	return dst
}

// sgrLen is the length of the SGR sequence (ESC [ params m, params digits,
// ';' or ':') at the start of b, or 0.
func sgrLen(b []byte) int {
	if len(b) < 3 || b[0] != 0x1b || b[1] != '[' {
		return 0
	}
	for i := 2; i < len(b) && i < 64; i++ {
		switch c := b[i]; {
		case c == 'm':
			return i + 1
		case (c >= '0' && c <= '9') || c == ';' || c == ':':
		default:
			return 0
		}
	}
	return 0
}
