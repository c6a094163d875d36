//go:build unix

// Command launch runs one command of the scale benchmark (hack/bench) and writes its peak RSS, CPU
// time and start and end times as JSON:
//
//	launch -rusage FILE -- ARGV...
//
// Why a launcher: Go starts processes with clone(CLONE_VM|CLONE_VFORK), so until the exec the child
// shares its parent's memory, and Linux carries the old memory's peak RSS into the child's
// ru_maxrss at exec. Started straight from the benchmark (client-go alone makes it 60–70 MiB),
// every child "peaked" at the benchmark's own size, kubectl and /bin/true included. This launcher
// imports only the standard library: its own peak is a few MiB, below any command measured.
// SIGINT and SIGTERM are passed on; stdin, stdout and stderr are the child's.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

// launched is what launch writes about the process it ran.
type launched struct {
	StartNs int64 `json:"startNs"` // unix ns just before the start
	EndNs   int64 `json:"endNs"`   // unix ns after the exit
	MaxRSS  int64 `json:"maxRSSKiB"`
	CPUNs   int64 `json:"cpuNs"` // user + system
	Code    int   `json:"code"`
}

func main() { os.Exit(launchMain(os.Args[1:])) }

func launchMain(args []string) int {
	fs := flag.NewFlagSet("launch", flag.ContinueOnError)
	out := fs.String("rusage", "", "write the measurements here (JSON)")
	if err := fs.Parse(args); err != nil || fs.NArg() == 0 || *out == "" {
		fmt.Fprintln(os.Stderr, "usage: launch -rusage FILE -- ARGV...")
		return 2
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	cmd := exec.Command(fs.Arg(0), fs.Args()[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	var l launched
	l.StartNs = time.Now().UnixNano()
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 127
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				_ = cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	err := cmd.Wait()
	l.EndNs = time.Now().UnixNano()
	close(done)
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		fmt.Fprintln(os.Stderr, err)
		return 127
	}
	ps := cmd.ProcessState
	l.Code = ps.ExitCode()
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		l.MaxRSS = int64(ru.Maxrss) // KiB on Linux
	}
	l.CPUNs = int64(ps.UserTime() + ps.SystemTime())
	b, _ := json.Marshal(l)
	if err := os.WriteFile(*out, b, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 127
	}
	return max(l.Code, 0)
}
