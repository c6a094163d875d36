//go:build unix

package cmd

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

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
