package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/gobrave/kubectl-gobrave/pkg/cmd"
)

// profileMain runs the plugin's command tree in this process, as cmd/kubectl-gobrave's main does,
// under the CPU profiler, and writes a heap profile at the end:
//
//	go run ./hack/bench profile -cpuprofile cpu.out -memprofile mem.out -- recover --once --state-db X
//
// The plugin's own binary has no profiling hooks; this is how the figures in docs/performance.md
// were explained.
func profileMain(args []string) int {
	fs := flag.NewFlagSet("profile", flag.ContinueOnError)
	cpu := fs.String("cpuprofile", "", "write a CPU profile here")
	mem := fs.String("memprofile", "", "write a heap profile (in use at the end, after a GC) here")
	tr := fs.String("trace", "", "write an execution trace here (go tool trace: the stages of recover are regions)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *cpu != "" {
		f, err := os.Create(*cpu)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	if *tr != "" {
		f, err := os.Create(*tr)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer f.Close()
		if err := trace.Start(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer trace.Stop()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	f := cmd.NewFactory()
	root := cmd.NewCmdRoot(f, streams)
	root.SetArgs(fs.Args())
	err := root.ExecuteContext(ctx)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	stop()
	if *cpu != "" {
		pprof.StopCPUProfile()
	}
	if *mem != "" {
		runtime.GC()
		if f, ferr := os.Create(*mem); ferr == nil {
			_ = pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: %s\n", cmd.FormatError(err))
	}
	return cmd.ExitCode(err)
}
