//go:build unix

package store

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time used by this process so far: benchmarks report it
// next to the wall time, which depends on the machine's load.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
