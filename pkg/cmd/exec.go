package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/gobrave/kubectl-gobrave/pkg/runtime"
	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
)

// ExecOptions are the options of exec.
type ExecOptions struct {
	genericiooptions.IOStreams
	f         *Factory
	Stdin     bool
	TTY       bool
	Container string

	// Executor opens the stream to a pod's exec URL. Nil means what kubectl
	// does: WebSocket, falling back to SPDY when the upgrade is refused.
	Executor func(u *url.URL, cfg *rest.Config) (remotecommand.Executor, error)

	// Arg is the workload; Command runs in its newest running pod.
	Arg     string
	Command []string
}

// NewExecOptions returns exec's options with their defaults.
func NewExecOptions(f *Factory, streams genericiooptions.IOStreams) *ExecOptions {
	return &ExecOptions{IOStreams: streams, f: f, Executor: DefaultExecutor}
}

// NewCmdExec runs a command in a workload's newest running pod.
func NewCmdExec(f *Factory, streams genericiooptions.IOStreams) *cobra.Command {
	return NewCmdExecWithOptions(NewExecOptions(f, streams))
}

// NewCmdExecWithOptions builds exec over o (tests replace o.Executor).
func NewCmdExecWithOptions(o *ExecOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "exec ID [-i] [-t] [-c CONTAINER] -- COMMAND [ARGS...]",
		Short: "Run a command in a workload's newest running pod",
		Long: `Run a command in the newest running pod of a workload, like kubectl exec. The pod is found by
ownership (the Job's, or a ReplicaSet's of the Deployment), never by its labels alone. -i passes stdin,
-t (with -i, from a terminal) gives the command a TTY in raw mode that follows the terminal's size.
The command's exit code becomes the exit code of kubectl gobrave.

ID is a runtime ID (k8s-default|deployment|web), deployment/NAME or job/NAME, or a bare NAME
that exactly one record has.`,
		Example: `  kubectl gobrave exec web -- ls /usr/share/nginx/html
  kubectl gobrave exec -it web -- sh
  kubectl gobrave exec k8s-default|job|import -c import -- cat /tmp/progress`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Complete(cmd, args); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().BoolVarP(&o.Stdin, "stdin", "i", o.Stdin, "Pass stdin to the command")
	cmd.Flags().BoolVarP(&o.TTY, "tty", "t", o.TTY, "Give the command a TTY (needs -i and a terminal on stdin)")
	cmd.Flags().StringVarP(&o.Container, "container", "c", o.Container, "Container to run the command in (default: the pod's first)")
	return cmd
}

// Complete splits the arguments at --: the ID before, the command after.
func (o *ExecOptions) Complete(cmd *cobra.Command, args []string) error {
	dash := cmd.ArgsLenAtDash()
	if dash < 0 {
		return usageErrorf("exec needs the command after --: kubectl gobrave exec ID -- COMMAND [ARGS...]")
	}
	if dash != 1 {
		return usageErrorf("exec takes one ID before --, got %d: kubectl gobrave exec ID -- COMMAND [ARGS...]", dash)
	}
	o.Arg, o.Command = args[0], args[dash:]
	return nil
}

// Validate checks the ID, the command and the flags without I/O.
func (o *ExecOptions) Validate() error {
	if len(o.Command) == 0 || o.Command[0] == "" {
		return usageErrorf("exec needs a command after --: kubectl gobrave exec %s -- COMMAND [ARGS...]", o.Arg)
	}
	if o.Container != "" {
		if errs := validation.IsDNS1123Label(o.Container); len(errs) > 0 {
			return usageErrorf("-c %q is not a container name: %s", o.Container, errs[0])
		}
	}
	return ParseRef(o.Arg)
}

// Run runs the command and returns its exit code as an *ExitCodeError.
func (o *ExecOptions) Run(ctx context.Context) error {
	_, ws, err := o.f.resolveAll(ctx, []string{o.Arg})
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
	pod, err := runtime.New(client, id.Runtime).NewestPod(ctx, id, ws[0].UID, true)
	if err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	container, err := pickContainer(pod, o.Container)
	if err != nil {
		return fmt.Errorf("exec %s: %w", id, err)
	}
	ctxName, err := o.f.ContextFor(id.Runtime)
	if err != nil {
		return err
	}
	cfg, err := o.f.RESTConfig(ctxName)
	if err != nil {
		return err
	}

	tty := o.setupTTY()
	stdin, stderr := io.Reader(nil), o.ErrOut
	if o.Stdin {
		stdin = o.In
	}
	if tty.on {
		// A TTY merges stderr into stdout.
		stderr = nil
	}
	u, err := execURL(cfg, pod, corev1.PodExecOptions{
		Container: container,
		Command:   o.Command,
		Stdin:     stdin != nil,
		Stdout:    o.Out != nil,
		Stderr:    stderr != nil,
		TTY:       tty.on,
	})
	if err != nil {
		return fmt.Errorf("exec %s: %w", id, err)
	}
	newExecutor := o.Executor
	if newExecutor == nil {
		newExecutor = DefaultExecutor
	}
	executor, err := newExecutor(u, cfg)
	if err != nil {
		return fmt.Errorf("exec %s (pod %s): %w", id, pod.Name, err)
	}

	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var sizes remotecommand.TerminalSizeQueue
	if tty.on {
		restore, err := tty.raw()
		if err != nil {
			return fmt.Errorf("exec %s: terminal raw mode: %w", id, err)
		}
		defer restore()
		sizes = tty.sizes(sctx)
	}
	err = executor.StreamWithContext(sctx, remotecommand.StreamOptions{
		Stdin: stdin, Stdout: o.Out, Stderr: stderr, Tty: tty.on, TerminalSizeQueue: sizes,
	})
	var exit utilexec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &exit) && exit.Exited():
		return &ExitCodeError{Code: exit.ExitStatus(), Err: fmt.Errorf("exec %s (pod %s): %w", id, pod.Name, err)}
	case ctx.Err() != nil:
		return fmt.Errorf("exec %s (pod %s): %w", id, pod.Name, ctx.Err())
	}
	return fmt.Errorf("exec %s (pod %s, container %s): %w (check 'kubectl gobrave inspect %s')", id, pod.Name, container, err, id)
}

// pickContainer returns the named container of pod, else its first one.
func pickContainer(pod *corev1.Pod, name string) (string, error) {
	var names []string
	for _, c := range pod.Spec.Containers {
		if name == "" || c.Name == name {
			return c.Name, nil
		}
		names = append(names, c.Name)
	}
	if name == "" {
		return "", fmt.Errorf("pod %s has no containers", pod.Name)
	}
	return "", fmt.Errorf("pod %s has no container %q (its containers: %s)", pod.Name, name, strings.Join(names, ", "))
}

// execURL is the URL of pod's exec subresource with opts as parameters.
func execURL(cfg *rest.Config, pod *corev1.Pod, opts corev1.PodExecOptions) (*url.URL, error) {
	c, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return c.RESTClient().Post().
		Namespace(pod.Namespace).Resource("pods").Name(pod.Name).SubResource("exec").
		VersionedParams(&opts, scheme.ParameterCodec).
		URL(), nil
}

// DefaultExecutor is kubectl's: the WebSocket protocol, falling back to SPDY
// when the server (or a proxy) refuses the upgrade.
func DefaultExecutor(u *url.URL, cfg *rest.Config) (remotecommand.Executor, error) {
	spdy, err := remotecommand.NewSPDYExecutor(cfg, "POST", u)
	if err != nil {
		return nil, err
	}
	// RFC 6455 requires GET for the WebSocket handshake.
	ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", u.String())
	if err != nil {
		return nil, err
	}
	return remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
}

// execTTY is the local terminal of an exec with -t.
type execTTY struct {
	on    bool
	in    int // file descriptor of stdin
	size  int // file descriptor the window size is read from
	state *term.State
	// raise re-raises a signal after the terminal is restored; nil means
	// raiseSignal (tests replace it).
	raise func(os.Signal)
}

// setupTTY decides whether the command gets a TTY: -t needs -i and a
// terminal on stdin; otherwise it warns, as kubectl does, and runs without.
func (o *ExecOptions) setupTTY() *execTTY {
	t := &execTTY{}
	if !o.TTY {
		return t
	}
	if !o.Stdin {
		fmt.Fprintln(o.ErrOut, "Unable to use a TTY - pass -i with -t to attach stdin")
		return t
	}
	in, ok := terminalFd(o.In)
	if !ok {
		fmt.Fprintln(o.ErrOut, "Unable to use a TTY - input is not a terminal or the right kind of file")
		return t
	}
	t.on, t.in, t.size = true, in, in
	if out, ok := terminalFd(o.Out); ok {
		t.size = out
	}
	return t
}

// terminalFd returns the file descriptor of s when it is a terminal.
func terminalFd(s any) (int, bool) {
	f, ok := s.(interface{ Fd() uintptr })
	if !ok {
		return 0, false
	}
	fd := int(f.Fd())
	return fd, term.IsTerminal(fd)
}

// raw puts the terminal in raw mode and returns what restores it (the
// caller defers it, so a panic of the exec restores it too). As kubectl's
// TTY.Safe does, a signal that ends the process while the terminal is raw —
// SIGHUP when the terminal goes away, SIGQUIT, SIGINT, SIGTERM — restores it
// first; then SIGHUP and SIGQUIT do what they would have done (raise), and
// SIGINT and SIGTERM go on cancelling the command through main.
func (t *execTTY) raw() (func(), error) {
	state, err := term.MakeRaw(t.in)
	if err != nil {
		return nil, err
	}
	var once sync.Once
	restore := func() { once.Do(func() { _ = term.Restore(t.in, state) }) }
	raise := t.raise
	if raise == nil {
		raise = raiseSignal
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, ttySignals...)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			restore()
			if diesOf(s) {
				signal.Stop(sigs)
				raise(s)
			}
		case <-done:
		}
	}()
	var stop sync.Once
	return func() {
		stop.Do(func() {
			signal.Stop(sigs)
			close(done)
		})
		restore()
	}, nil
}

// sizes is a TerminalSizeQueue with the terminal's size now and after every
// resize, until ctx ends.
func (t *execTTY) sizes(ctx context.Context) remotecommand.TerminalSizeQueue {
	q := &sizeQueue{ch: make(chan remotecommand.TerminalSize, 1), done: ctx.Done()}
	resized := resizeEvents(ctx)
	go func() {
		var last remotecommand.TerminalSize
		for {
			if w, h, err := term.GetSize(t.size); err == nil {
				s := remotecommand.TerminalSize{Width: uint16(w), Height: uint16(h)}
				if s != last && s.Width > 0 && s.Height > 0 {
					last = s
					select {
					case q.ch <- s:
					case <-ctx.Done():
						return
					}
				}
			}
			select {
			case <-resized:
			case <-ctx.Done():
				return
			}
		}
	}()
	return q
}

// sizeQueue hands terminal sizes to the executor; Next returns nil once the
// exec is over.
type sizeQueue struct {
	ch   chan remotecommand.TerminalSize
	done <-chan struct{}
}

func (q *sizeQueue) Next() *remotecommand.TerminalSize {
	select {
	case s := <-q.ch:
		return &s
	case <-q.done:
		return nil
	}
}
