//go:build linux

package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// Issue 14, item 9: `exec -it` on a real terminal (a pty) puts it in raw mode, and a SIGQUIT or
// SIGHUP sent to the plugin while the command runs leaves it restored, as kubectl does.
func TestExecTTYRestoredOnSignals(t *testing.T) {
	requireCluster(t)
	ns := newNamespace(t)
	// The full ID: the suite's database is shared, and other tests run a "shell" too.
	id := strings.TrimSpace(runOK(t, "run", "shell", "-n", ns, "--image", "registry.invalid/shell:1", "--timeout", "2m").stdout)
	for _, sig := range []syscall.Signal{syscall.SIGQUIT, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			ptmx, tty, err := pty.Open()
			if err != nil {
				t.Skipf("no pseudo-terminal: %v", err)
			}
			defer ptmx.Close()
			defer tty.Close()
			var printed syncBuffer
			go func() { _, _ = io.Copy(&printed, ptmx) }() // what the plugin prints, for a failure
			fd := int(tty.Fd())
			cooked, err := unix.IoctlGetTermios(fd, unix.TCGETS)
			if err != nil || cooked.Lflag&unix.ICANON == 0 {
				t.Fatalf("the new pty is not in canonical mode: %v", err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
			defer cancel()
			// kubectl execs the plugin in its own process, so the pid is the plugin's.
			cmd := exec.CommandContext(ctx, "kubectl", "gobrave", "exec", "-it", id, "--", "sleep", "20")
			cmd.Env = os.Environ()
			cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waited := make(chan error, 1)
			go func() { waited <- cmd.Wait() }()
			raw := func() bool {
				tio, err := unix.IoctlGetTermios(fd, unix.TCGETS)
				return err == nil && tio.Lflag&unix.ICANON == 0
			}
			waitFor(t, waitTimeout, func() (bool, error) {
				select {
				case err := <-waited:
					t.Fatalf("exec -it ended before its terminal went raw: %v; it printed %q", err, printed.String())
				default:
				}
				if !raw() {
					return false, fmt.Errorf("the terminal is not raw yet; the plugin printed %q", printed.String())
				}
				return true, nil
			})
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-waited:
				// It dies of the signal (SIGHUP) or, for SIGQUIT, of Go's handler of it (exit 2).
				if err == nil {
					t.Errorf("the plugin exited 0 after %v", sig)
				}
			case <-time.After(waitTimeout):
				t.Fatalf("the plugin did not end within %s of %v", waitTimeout, sig)
			}
			if raw() {
				t.Errorf("the terminal is still raw after %v ended exec -it", sig)
			}
			got, _ := unix.IoctlGetTermios(fd, unix.TCGETS)
			if got.Lflag != cooked.Lflag || got.Iflag != cooked.Iflag || got.Oflag != cooked.Oflag {
				t.Errorf("terminal not restored after %v: lflag %#x iflag %#x oflag %#x, want %#x %#x %#x",
					sig, got.Lflag, got.Iflag, got.Oflag, cooked.Lflag, cooked.Iflag, cooked.Oflag)
			}
		})
	}
}
