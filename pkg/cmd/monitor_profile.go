//go:build gobraveprof

package cmd

import (
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"time"
)

// heapProfileEnv names a file: when set, a monitoring command writes a heap
// profile there each time the live heap after a collection reaches a new
// peak (checked every 200 ms), and once more on its way out
// (FILE.exit). A hidden knob for finding where the memory of a monitor
// goes on a real cluster (go tool pprof -sample_index=inuse_space FILE);
// the plugin has no flag for it. Only in a build with -tags gobraveprof:
// linking runtime/pprof into the plugin is not free (monitor_noprofile.go).
// The plugin turns the runtime's allocation sampling off at start
// (cmd/kubectl-gobrave's noHeapProfile), so the profile is empty unless
// GODEBUG=memprofilerate=524288 (the runtime's default) is set too.
const heapProfileEnv = "GOBRAVE_HEAP_PROFILE"

// heapProfileEveryEnv, a duration (e.g. 5s), makes the watcher of
// heapProfileEnv also write FILE.NNN every that often (NNN counting from
// 000, each logged with the time since start and the live heap): the
// profiles of each phase of a run (initial list, snapshot pass, steady
// state), not only of the peak.
const heapProfileEveryEnv = "GOBRAVE_HEAP_PROFILE_EVERY"

// startHeapProfile starts the watcher of heapProfileEnv; the returned func
// stops it and writes the exit profile. A no-op when the variable is unset.
func startHeapProfile() (stop func()) {
	path := os.Getenv(heapProfileEnv)
	if path == "" {
		return func() {}
	}
	write := func(p string) {
		f, err := os.Create(p)
		if err != nil {
			return
		}
		defer f.Close()
		_ = pprof.Lookup("heap").WriteTo(f, 0)
	}
	every, _ := time.ParseDuration(os.Getenv(heapProfileEveryEnv))
	start := time.Now()
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/cycles/total:gc-cycles"}}
		var peak uint64
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		next, seq := start.Add(every), 0
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			metrics.Read(s)
			if every > 0 && time.Now().After(next) {
				next = next.Add(every)
				p := fmt.Sprintf("%s.%03d", path, seq)
				seq++
				write(p)
				fmt.Fprintf(os.Stderr, "gobrave: heap profile at %.1f s, live heap %d bytes (gc %d) -> %s\n", time.Since(start).Seconds(), s[0].Value.Uint64(), s[1].Value.Uint64(), p)
			}
			if live := s[0].Value.Uint64(); live > peak {
				peak = live
				write(path)
				fmt.Fprintf(os.Stderr, "gobrave: heap profile at live heap %d bytes (gc %d) -> %s\n", live, s[1].Value.Uint64(), path)
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		runtime.GC()
		write(path + ".exit")
	}
}
