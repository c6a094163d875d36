//go:build unix

package cmd

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// ttySignals end a process whose terminal is raw; kubectl's interrupt
// handler (k8s.io/kubectl/pkg/util/interrupt) watches the same ones.
var ttySignals = []os.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT}

// diesOf reports whether the process should die of s once the terminal is
// restored: SIGHUP (the terminal went away) and SIGQUIT. SIGINT and SIGTERM
// are main's: they cancel the command, which shuts down in order.
func diesOf(s os.Signal) bool { return s == syscall.SIGHUP || s == syscall.SIGQUIT }

// raiseSignal lets s do what it would have done without our handler.
func raiseSignal(s os.Signal) {
	signal.Reset(s)
	if sig, ok := s.(syscall.Signal); ok {
		_ = syscall.Kill(os.Getpid(), sig)
	}
}

// resizeEvents signals every terminal resize (SIGWINCH) until ctx ends.
func resizeEvents(ctx context.Context) <-chan struct{} {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGWINCH)
	out := make(chan struct{}, 1)
	go func() {
		defer signal.Stop(sig)
		for {
			select {
			case <-ctx.Done():
				return
			case <-sig:
				select {
				case out <- struct{}{}:
				default: // one pending resize is enough: the size is read afresh
				}
			}
		}
	}()
	return out
}
