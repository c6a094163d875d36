//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gobrave/kubectl-gobrave/pkg/cmd"
)

// shutdownEnv makes the test binary a process that blocks in shutdown.
const shutdownEnv = "GOBRAVE_TEST_BLOCKED_SHUTDOWN"

func TestMain(m *testing.M) {
	if os.Getenv(shutdownEnv) != "" {
		blockedInShutdown()
		return
	}
	os.Exit(m.Run())
}

// blockedInShutdown takes its signals as main does, then, once interrupted,
// never finishes shutting down: like a store write retried while another
// process holds the database. It blocks reading stdin, which the test keeps
// open.
func blockedInShutdown() {
	ctx := signalContext(os.Stderr, os.Exit)
	fmt.Println("ready")
	<-ctx.Done()
	fmt.Println("shutting down")
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0) // reached only if the second signal did not end the process
}

// TestSecondSignalExits sends real signals to a process stuck in shutdown:
// the first starts the shutdown, the second ends the process with 130.
func TestSecondSignalExits(t *testing.T) {
	tests := []struct {
		name          string
		first, second syscall.Signal
	}{
		{"Ctrl-C twice", syscall.SIGINT, syscall.SIGINT},
		{"SIGTERM twice", syscall.SIGTERM, syscall.SIGTERM},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			c := exec.CommandContext(ctx, os.Args[0])
			c.Env = append(os.Environ(), shutdownEnv+"=1")
			stdin, err := c.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			defer stdin.Close()
			stdout, err := c.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			c.Stderr = &stderr
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			lines := bufio.NewScanner(stdout)
			next := func(want string) {
				t.Helper()
				if !lines.Scan() {
					t.Fatalf("stdout ended before %q (%v); stderr: %s", want, lines.Err(), stderr.String())
				}
				if got := lines.Text(); got != want {
					t.Fatalf("stdout line %q, want %q", got, want)
				}
			}

			next("ready")
			if err := c.Process.Signal(tt.first); err != nil {
				t.Fatal(err)
			}
			next("shutting down")
			if err := c.Process.Signal(tt.second); err != nil {
				t.Fatal(err)
			}
			for lines.Scan() {
				t.Errorf("unexpected stdout line %q", lines.Text())
			}
			err = c.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != cmd.ExitInterrupted {
				t.Fatalf("process ended with %v, want exit code %d; stderr: %s", err, cmd.ExitInterrupted, stderr.String())
			}
			if diff := cmp.Diff(twiceMsg, stderr.String()); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
		})
	}
}
