// Package cmd holds the cobra commands of kubectl-gobrave: one file per verb,
// each an Options struct with Complete, Validate and Run.
package cmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/klog/v2"

	"github.com/gobrave/kubectl-gobrave/pkg/config"
	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
	"github.com/gobrave/kubectl-gobrave/pkg/spec"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// Exit codes, documented in README.md and docs/output.md.
const (
	ExitOK      = 0
	ExitError   = 1 // an API or runtime error, a wait that timed out
	ExitInvalid = 2 // invalid input or usage, detected before any API call
	// ExitInterrupted is a command ended by Ctrl-C (SIGINT) or SIGTERM: 128+2,
	// what shells report for a process that SIGINT ended.
	ExitInterrupted = 130
)

// ErrUsage marks invalid input or usage found by the CLI itself.
var ErrUsage = errors.New("invalid usage")

// usageErrorf returns an error that maps to exit code 2.
func usageErrorf(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, a...))
}

// ExitError carries an explicit exit code (e.g. exec's remote exit code).
type ExitCodeError struct {
	Code int
	Err  error
}

func (e *ExitCodeError) Error() string { return e.Err.Error() }
func (e *ExitCodeError) Unwrap() error { return e.Err }

// interruptedError is a command that main's signal context ended. Its
// message says what was interrupted; it wraps context.Canceled, whose text
// it leaves out, and maps to ExitInterrupted.
type interruptedError struct{ msg string }

func (e *interruptedError) Error() string { return e.msg }
func (e *interruptedError) Unwrap() error { return context.Canceled }

func interruptedf(format string, a ...any) error {
	return &interruptedError{msg: fmt.Sprintf(format, a...)}
}

// ExitCode maps an error returned by a command to the process exit code.
func ExitCode(err error) int {
	var ec *ExitCodeError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ec):
		return ec.Code
	case errors.Is(err, context.Canceled):
		// Only main's signal context is cancelled from outside; the
		// cancellations of monitors and waits inside are never returned.
		return ExitInterrupted
	case errors.Is(err, ErrUsage), errors.Is(err, runtimeid.ErrInvalid),
		errors.Is(err, spec.ErrInvalid), errors.Is(err, config.ErrInvalid),
		errors.Is(err, store.ErrUnsafe), errors.Is(err, config.ErrNoHome):
		return ExitInvalid
	case strings.HasPrefix(err.Error(), "unknown command "):
		// cobra's own error for a verb that does not exist.
		return ExitInvalid
	}
	return ExitError
}

// FormatError renders err as the one line main prints after "error: ".
func FormatError(err error) string {
	msg := err.Error()
	for _, prefix := range []string{ErrUsage.Error() + ": ", runtimeid.ErrInvalid.Error() + " "} {
		msg = strings.Replace(msg, prefix, strings.TrimSuffix(prefix, ": ")+" ", 1)
	}
	msg = strings.ReplaceAll(msg, ErrUsage.Error()+" ", "")
	// errors.Join separates with newlines; keep the contract of one line.
	// Server errors quote text from the cluster: escape control characters
	// so that the line cannot drive the terminal (see escapeTerminal).
	return escapeTerminal(strings.Join(strings.Fields(strings.ReplaceAll(msg, "\n", "; ")), " "))
}

// NewCmdRoot builds the kubectl gobrave command tree.
func NewCmdRoot(f *Factory, streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "gobrave",
		Short: "A docker-like lifecycle for containers on any Kubernetes cluster",
		Long: `kubectl gobrave gives containers a simple, docker-like lifecycle on any Kubernetes cluster.
A service becomes a Deployment (plus an optional ClusterIP Service), a task becomes a Job.
Each workload gets a stable runtime ID such as k8s-default|deployment|web-api; IDs, specs,
last states and event histories live in a local SQLite database, so the tool remembers
across restarts, and 'recover' reattaches monitors after a restart.

Exit codes: 0 success; 1 an API or runtime error (or a wait that timed out or failed fast);
2 invalid input or usage, found before any API call, with nothing changed;
130 interrupted (Ctrl-C or SIGTERM; a second one exits without waiting).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Annotations: map[string]string{
			cobra.CommandDisplayNameAnnotation: "kubectl gobrave",
		},
		Example: `  kubectl gobrave create web --image nginx:1.27 --port 80 --expose
  kubectl gobrave ps
  kubectl gobrave stop web --wait
  kubectl gobrave recover --once`,
		// Check the global flags and the profiles file before any verb
		// opens the database or talks to the cluster.
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if f.RuntimeFlag != "" && !runtimeid.IsRuntime(f.RuntimeFlag) {
				return usageErrorf("--runtime %q: use k8s or k3s", f.RuntimeFlag)
			}
			_, err := f.Config()
			return err
		},
	}
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)
	if f.Warnings == nil {
		f.Warnings = streams.ErrOut
	}
	cmd.SetIn(streams.In)
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageErrorf("%v (see '%s --help')", err, c.CommandPath())
	})

	flags := cmd.PersistentFlags()
	f.ConfigFlags.AddFlags(flags)
	flags.StringVar(&f.RuntimeFlag, "runtime", f.RuntimeFlag, "Runtime name for new IDs and lookups: k8s or k3s (default: the config file's defaultRuntime, else k8s)")
	flags.StringVar(&f.StateDBFlag, "state-db", f.StateDBFlag, "Path of the state database (default $GOBRAVE_HOME/state.db, else $XDG_DATA_HOME/gobrave/state.db, else ~/.local/share/gobrave/state.db)")
	flags.StringVar(&f.ConfigFlag, "config", f.ConfigFlag, "Path of the runtime profiles file (default $GOBRAVE_CONFIG, else $XDG_CONFIG_HOME/gobrave/config.yaml, else ~/.config/gobrave/config.yaml)")
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	flags.AddGoFlag(klogFlags.Lookup("v"))

	cmd.AddCommand(
		NewCmdCreate(f, streams),
		NewCmdRun(f, streams),
		NewCmdLifecycle(f, streams, verbStart),
		NewCmdLifecycle(f, streams, verbStop),
		NewCmdLifecycle(f, streams, verbPause),
		NewCmdLifecycle(f, streams, verbResume),
		NewCmdLifecycle(f, streams, verbRestart),
		NewCmdLifecycle(f, streams, verbDelete),
		NewCmdLogs(f, streams),
		NewCmdExec(f, streams),
		NewCmdPortForward(f, streams),
		NewCmdInspect(f, streams),
		NewCmdPs(f, streams),
		NewCmdEvents(f, streams),
		NewCmdPrune(f, streams),
		NewCmdMonitor(f, streams),
		NewCmdWait(f, streams),
		NewCmdRecover(f, streams),
		NewCmdAdopt(f, streams),
		NewCmdUpdate(f, streams),
		NewCmdHistory(f, streams),
		NewCmdDoctor(f, streams),
		NewCmdVersion(f, streams),
	)
	registerCompletion(f, cmd)
	wrapArgs(cmd)
	return cmd
}

// wrapArgs makes cobra's argument-count errors usage errors (exit code 2).
func wrapArgs(c *cobra.Command) {
	if orig := c.Args; orig != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := orig(cmd, args); err != nil {
				return usageErrorf("%v (see '%s --help')", err, cmd.CommandPath())
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		wrapArgs(sub)
	}
}
