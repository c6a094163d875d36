//go:build linux

package cmd

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// The terminal of exec -t is restored however the exec ends: normally, by a
// panic, or by a signal that would end the process while it is raw (SIGHUP
// when the terminal goes away, SIGQUIT, SIGINT, SIGTERM); SIGHUP and SIGQUIT
// then do what they would have done.
func TestExecTTYRestored(t *testing.T) {
	tests := []struct {
		name      string
		end       func(t *testing.T, restore func())
		wantRaise os.Signal
	}{
		{name: "normal end", end: func(_ *testing.T, restore func()) { restore() }},
		{name: "panic", end: func(_ *testing.T, restore func()) {
			defer func() { _ = recover() }()
			defer restore()
			panic("boom")
		}},
		{name: "SIGHUP", end: func(t *testing.T, _ func()) { kill(t, syscall.SIGHUP) }, wantRaise: syscall.SIGHUP},
		{name: "SIGQUIT", end: func(t *testing.T, _ func()) { kill(t, syscall.SIGQUIT) }, wantRaise: syscall.SIGQUIT},
		{name: "SIGTERM", end: func(t *testing.T, _ func()) { kill(t, syscall.SIGTERM) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ptmx, tty, err := pty.Open()
			if err != nil {
				t.Skipf("no pseudo-terminal: %v", err)
			}
			defer ptmx.Close()
			defer tty.Close()
			fd := int(tty.Fd())
			cooked := termios(t, fd)
			raised := make(chan os.Signal, 1)
			et := &execTTY{on: true, in: fd, size: fd, raise: func(s os.Signal) { raised <- s }}
			restore, err := et.raw()
			if err != nil {
				t.Fatal(err)
			}
			defer restore()
			if got := termios(t, fd); got.Lflag&unix.ICANON != 0 {
				t.Fatal("the terminal is not raw")
			}
			tt.end(t, restore)
			// A signal is handled on another goroutine: poll for its effect.
			deadline := time.Now().Add(10 * time.Second)
			for termios(t, fd).Lflag != cooked.Lflag && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if got := termios(t, fd); got.Lflag != cooked.Lflag || got.Iflag != cooked.Iflag || got.Oflag != cooked.Oflag {
				t.Errorf("terminal not restored: lflag %#x, want %#x", got.Lflag, cooked.Lflag)
			}
			if tt.wantRaise != nil {
				select {
				case s := <-raised:
					if s != tt.wantRaise {
						t.Errorf("raised %v, want %v", s, tt.wantRaise)
					}
				case <-time.After(10 * time.Second):
					t.Errorf("%v was not raised again after the restore", tt.wantRaise)
				}
			} else {
				restore()
				select {
				case s := <-raised:
					t.Errorf("raised %v: only SIGHUP and SIGQUIT end the process here", s)
				default:
				}
			}
		})
	}
}

func kill(t *testing.T, s syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(os.Getpid(), s); err != nil {
		t.Fatal(err)
	}
}

func termios(t *testing.T, fd int) *unix.Termios {
	t.Helper()
	tio, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	return tio
}
