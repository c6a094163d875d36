// Command kubectl-gobrave is the kubectl plugin: kubectl gobrave ...
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/gobrave/kubectl-gobrave/pkg/cmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	f := cmd.NewFactory()
	err := cmd.NewCmdRoot(f, streams).ExecuteContext(ctx)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: %s\n", cmd.FormatError(err))
	}
	os.Exit(cmd.ExitCode(err))
}
