package cmd_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gobrave/kubectl-gobrave/pkg/cmd"
)

func TestExitCode(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"success", nil, cmd.ExitOK},
		{"API error", errors.New("deployments.apps \"web\" is forbidden"), cmd.ExitError},
		{"timed out", context.DeadlineExceeded, cmd.ExitError},
		{"usage", fmt.Errorf("%w: --for %q", cmd.ErrUsage, "up"), cmd.ExitInvalid},
		{"interrupted", fmt.Errorf("create web: %w", context.Canceled), cmd.ExitInterrupted},
		{"interrupted among other errors", errors.Join(errors.New("stop task: forbidden"), fmt.Errorf("wait: %w", context.Canceled)), cmd.ExitInterrupted},
		{"exec's remote exit code", &cmd.ExitCodeError{Code: 3, Err: errors.New("command terminated with exit code 3")}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := cmd.ExitCode(tt.err); got != tt.want {
				t.Errorf("ExitCode(%v) = %d, want %d", tt.err, got, tt.want)
			}
		})
	}
}

// keepDeployments makes the fake cluster accept deletes of deployments
// without removing them, as a real one does while a foreground deletion
// waits for the pods. The condition it returns is true from the first GET
// of a deployment after a delete: delete --wait has begun to poll.
func keepDeployments(c *cluster) (polling func() bool) {
	var deleted, polled atomic.Bool
	c.PrependReactor("delete", "deployments", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		deleted.Store(true)
		return true, nil, nil
	})
	c.PrependReactor("get", "deployments", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		if deleted.Load() && a.GetSubresource() == "" {
			polled.Store(true)
		}
		return false, nil, nil
	})
	return polled.Load
}

// TestWaitEnds: a wait whose deadline passes timed out (exit code 1); one
// whose context main's signal handler cancelled was interrupted (exit code
// 130), and says so rather than "timed out".
func TestWaitEnds(t *testing.T) {
	tests := []struct {
		name string
		args []string
		// seed prepares the cluster and the database and returns a
		// condition true once the command is waiting, to interrupt it then;
		// nil: not interrupted.
		seed     func(t *testing.T, h *harness) (waiting func() bool)
		wantCode int
		wantErr  string
	}{
		{
			name: "wait: deadline",
			args: []string{"wait", "web", "--for=exited", "--timeout=300ms"},
			seed: func(t *testing.T, h *harness) func() bool {
				seedWebTask(t, h)
				return nil
			},
			wantCode: cmd.ExitError,
			wantErr:  "timed out after 300ms waiting for exited: " + webID + " (created)",
		},
		{
			name: "wait: interrupted",
			args: []string{"wait", "web", "task", "--for=exited", "--timeout=1h"},
			seed: func(t *testing.T, h *harness) func() bool {
				seedWebTask(t, h)
				return func() bool { return h.clusters[""].watching("deployments") }
			},
			wantCode: cmd.ExitInterrupted,
			wantErr:  "interrupted while waiting for exited: " + webID + " (created), " + taskID + " (created)",
		},
		{
			name:     "run: deadline",
			args:     []string{"run", "web", "--image", "nginx:1.27", "--timeout=300ms"},
			seed:     func(*testing.T, *harness) func() bool { return nil },
			wantCode: cmd.ExitError,
			wantErr:  "run " + webID + ": timed out after 300ms waiting for started: " + webID + " (starting)",
		},
		{
			name: "run: interrupted",
			args: []string{"run", "web", "--image", "nginx:1.27", "--timeout=1h"},
			seed: func(t *testing.T, h *harness) func() bool {
				return func() bool { return h.clusters[""].watching("deployments") }
			},
			wantCode: cmd.ExitInterrupted,
			wantErr:  "run " + webID + ": interrupted while waiting for started: " + webID + " (starting)",
		},
		{
			name: "delete --wait: deadline",
			args: []string{"delete", "web", "--wait", "--timeout=300ms"},
			seed: func(t *testing.T, h *harness) func() bool {
				seedWebTask(t, h)
				keepDeployments(h.clusters[""])
				return nil
			},
			wantCode: cmd.ExitError,
			wantErr:  "timed out after 300ms waiting for deletion: " + webID + " still exist",
		},
		{
			name: "delete --wait: interrupted",
			args: []string{"delete", "web", "--wait", "--timeout=1h"},
			seed: func(t *testing.T, h *harness) func() bool {
				seedWebTask(t, h)
				return keepDeployments(h.clusters[""])
			},
			wantCode: cmd.ExitInterrupted,
			wantErr:  "interrupted while waiting for deletion: " + webID + " still exist",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			waiting := tt.seed(t, h)
			ctx, interrupt := context.WithCancel(t.Context()) // main's signal context
			defer interrupt()
			ch := h.runAsync(ctx, tt.args...)
			if waiting != nil {
				eventually(t, "the command to wait", func() bool {
					select {
					case r := <-ch:
						t.Fatalf("returned before it was interrupted: %s", r)
					default:
					}
					return waiting()
				})
				interrupt()
			}
			r := await(t, ch)
			checkExit(t, r, tt.wantCode, tt.wantErr)
			if !strings.HasSuffix(r.msg, tt.wantErr) {
				t.Errorf("error %q does not end with %q", r.msg, tt.wantErr)
			}
			if strings.Contains(r.msg, "\n") {
				t.Errorf("error is not one line: %q", r.msg)
			}
			interrupted := tt.wantCode == cmd.ExitInterrupted
			if got := errors.Is(r.err, context.Canceled); got != interrupted {
				t.Errorf("errors.Is(err, context.Canceled) = %v, want %v (err %v)", got, interrupted, r.err)
			}
		})
	}
}
