package main

import (
	"bytes"
	"context"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gobrave/kubectl-gobrave/pkg/cmd"
)

const twiceMsg = "error: interrupted twice, exiting without waiting for the monitors to record what they saw (run 'kubectl gobrave recover --once' to catch up)\n"

// within fails the test unless ch is ready within a generous deadline.
func within[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not happen within 30s", what)
	}
	var zero T
	return zero
}

// TestOnSignals: the first signal cancels the command's context and does not
// exit; the second exits with 130 after one line on stderr.
func TestOnSignals(t *testing.T) {
	tests := []struct {
		name          string
		first, second os.Signal
	}{
		{"Ctrl-C twice", os.Interrupt, os.Interrupt},
		{"SIGTERM then Ctrl-C", syscall.SIGTERM, os.Interrupt},
		{"Ctrl-C then SIGTERM", os.Interrupt, syscall.SIGTERM},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sigs := make(chan os.Signal) // a send returns once onSignals has it
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var stderr bytes.Buffer
			exits := make(chan int, 2)
			done := make(chan struct{})
			go func() {
				defer close(done)
				onSignals(sigs, cancel, &stderr, func(code int) { exits <- code })
			}()

			within(t, "delivering the first signal", send(sigs, tt.first))
			within(t, "cancelling the context", ctx.Done())
			if len(exits) > 0 {
				t.Fatalf("exited with %d after the first signal", <-exits)
			}

			within(t, "delivering the second signal", send(sigs, tt.second))
			within(t, "onSignals returning", done)
			if got := within(t, "exit", exits); got != cmd.ExitInterrupted {
				t.Errorf("exit code %d, want %d", got, cmd.ExitInterrupted)
			}
			if len(exits) > 0 {
				t.Errorf("exit called twice")
			}
			if diff := cmp.Diff(twiceMsg, stderr.String()); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
		})
	}
}

// send sends sig on sigs in the background and tells when it was received.
func send(sigs chan<- os.Signal, sig os.Signal) <-chan struct{} {
	sent := make(chan struct{})
	go func() {
		sigs <- sig
		close(sent)
	}()
	return sent
}

func TestNoHeapProfile(t *testing.T) {
	defer func(r int) { runtime.MemProfileRate = r }(runtime.MemProfileRate)
	runtime.MemProfileRate = 512 << 10
	noHeapProfile("gctrace=1")
	if runtime.MemProfileRate != 0 {
		t.Errorf("MemProfileRate = %d, want 0: the plugin writes no heap profiles", runtime.MemProfileRate)
	}
	runtime.MemProfileRate = 4096
	noHeapProfile("gctrace=1,memprofilerate=4096")
	if runtime.MemProfileRate != 4096 {
		t.Errorf("with GODEBUG memprofilerate, MemProfileRate = %d, want it kept (4096)", runtime.MemProfileRate)
	}
}
