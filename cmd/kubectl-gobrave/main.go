// Command kubectl-gobrave is the kubectl plugin: kubectl gobrave ...
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/gobrave/kubectl-gobrave/pkg/cmd"
)

func main() {
	noHeapProfile(os.Getenv("GODEBUG"))
	ctx := signalContext(os.Stderr, os.Exit)
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	f := cmd.NewFactory()
	err := cmd.NewCmdRoot(f, streams).ExecuteContext(ctx)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: %s\n", cmd.FormatError(err))
	}
	os.Exit(cmd.ExitCode(err))
}

// signalContext returns the context of the command: the first SIGINT or
// SIGTERM cancels it, and the command shuts down, recording what its
// monitors saw (writes retried while the database is busy, leases released),
// which can take seconds. A second signal calls exit at once.
func signalContext(stderr io.Writer, exit func(int)) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go onSignals(sigs, cancel, stderr, exit)
	return ctx
}

// onSignals cancels on the first signal from sigs and exits with
// cmd.ExitInterrupted on the second.
func onSignals(sigs <-chan os.Signal, cancel context.CancelFunc, stderr io.Writer, exit func(int)) {
	<-sigs
	cancel()
	<-sigs
	fmt.Fprintln(stderr, "error: interrupted twice, exiting without waiting for the monitors to record what they saw (run 'kubectl gobrave recover --once' to catch up)")
	exit(cmd.ExitInterrupted)
}

// noHeapProfile stops the runtime's sampling of allocations for heap
// profiles, which the plugin never writes (hack/bench profiles its commands
// in its own process): each sample keeps a record of its stack for the life
// of the process, in a hash table of 1.4 MB that the runtime maps at the
// first sample, ~1 MiB of recover's peak RSS at 100,000 workloads. Setting
// GODEBUG=memprofilerate=N keeps the runtime's choice.
func noHeapProfile(godebug string) {
	if !strings.Contains(godebug, "memprofilerate=") {
		runtime.MemProfileRate = 0
	}
}
