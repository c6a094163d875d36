//go:build !unix

package cmd

import (
	"context"
	"os"
	"time"
)

// ttySignals end a process whose console is raw.
var ttySignals = []os.Signal{os.Interrupt}

// diesOf: Ctrl-C cancels the command through main.
func diesOf(os.Signal) bool { return false }

func raiseSignal(os.Signal) {}

// resizeEvents has no SIGWINCH to wait for: it ticks every 250 ms (as kubectl
// does on Windows) and the size is compared with the last one sent.
func resizeEvents(ctx context.Context) <-chan struct{} {
	out := make(chan struct{}, 1)
	go func() {
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				select {
				case out <- struct{}{}:
				default:
				}
			}
		}
	}()
	return out
}
