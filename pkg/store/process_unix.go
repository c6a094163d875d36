//go:build unix

package store

import (
	"errors"
	"syscall"
)

// processAlive reports whether a process with the pid exists on this host.
// A process of another user (EPERM) is alive.
func processAlive(pid int) bool {
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
