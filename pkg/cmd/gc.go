package cmd

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// The garbage collector's settings, by what the process does. GOGC in the
// environment wins over both; a pass also leaves the collector alone when
// GOMEMLIMIT is set.
//
// A process that monitors (monitor, recover without --once, run --wait, ...)
// collects at GOGC 50: its live heap grows with the IDs it follows, and
// collecting at 1.5x the live heap instead of 2x took the median peak RSS of
// monitor --all over 5,000 workloads from 77 to 68 MiB for about 0.4 s more
// CPU, once (docs/performance.md).
//
// A one-shot pass (recover --once, ps --refresh) is different: its live heap
// is one batch of the streams and of the writer, 3-5 MB whatever N (its
// records are read and written in batches and never all held), and nearly
// everything it allocates is garbage within milliseconds. At GOGC 50 the
// collector ran every ~2.5 MB allocated, about 50 times over 10,000
// workloads, and marking, assists and the preemptions it needs took a
// quarter of the pass's CPU, on the writer's goroutine too, the pass's
// critical path. A pass collects at GOGC 400 under a soft limit of 20 MiB
// for the Go runtime's memory instead: the heap may grow to ~15 MB between
// collections, no further, so the peak RSS stays where GOGC 50 left it
// (~57 MiB at 100,000) and the collector runs about a fifth as often.
// Measured with hack/recmem at 100,000 (3 interleaved runs each): CPU 5.25 ->
// 4.48 s, wall 5.30 -> 4.54 s, peak RSS 56.9 -> 57.4 MiB; on a kwok cluster
// of 10,000: CPU 0.66 -> 0.54 s (docs/performance.md).
//
// A memory limit makes the collector run back to back once the live heap
// nears it. Should a pass's live heap ever outgrow half the limit (specs
// of hundreds of KiB, say), it goes back to the monitors' setting: after
// each collection passHeapCheck reads the live heap.
const (
	monitorGCPercent = 50
	passGCPercent    = 400
	passMemoryLimit  = 20 << 20
	passLiveCeiling  = passMemoryLimit / 2
)

type gcMode int

const (
	gcDefault gcMode = iota // Go's own (no command that streams has run)
	gcPass                  // passGCPercent under passMemoryLimit
	gcMonitor               // monitorGCPercent, no limit
)

var gcState struct {
	sync.Mutex
	mode gcMode
}

func gcFromEnv() bool { return os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" }

// tuneGCForMonitoring sets the monitors' setting, ending a pass's.
func tuneGCForMonitoring() {
	gcState.Lock()
	defer gcState.Unlock()
	setMonitorGC()
}

func setMonitorGC() {
	if gcState.mode == gcMonitor {
		return
	}
	if gcState.mode == gcPass {
		debug.SetMemoryLimit(math.MaxInt64)
	}
	gcState.mode = gcMonitor
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(monitorGCPercent)
	}
}

// tuneGCForPass sets a pass's setting, unless the process monitors already
// or the environment sets the collector.
func tuneGCForPass() {
	gcState.Lock()
	defer gcState.Unlock()
	if gcState.mode != gcDefault || gcFromEnv() {
		return
	}
	gcState.mode = gcPass
	debug.SetGCPercent(passGCPercent)
	debug.SetMemoryLimit(passMemoryLimit)
	watchPassHeap()
}

// watchPassHeap calls passHeapCheck after each collection, for as long as
// the pass's setting stands: a cleanup of an object nothing refers to runs
// once a collection has found it unreachable, and arms the next.
func watchPassHeap() {
	type sentinel struct{ _ *int } // with a pointer: never in a tiny block
	runtime.AddCleanup(&sentinel{}, func(struct{}) {
		live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		metrics.Read(live)
		if live[0].Value.Kind() == metrics.KindUint64 && passHeapCheck(live[0].Value.Uint64()) {
			watchPassHeap()
		}
	}, struct{}{})
}

// passHeapCheck ends the pass's setting when the live heap is above
// passLiveCeiling, and tells whether the pass's setting still stands.
func passHeapCheck(live uint64) bool {
	gcState.Lock()
	defer gcState.Unlock()
	if gcState.mode != gcPass {
		return false
	}
	if live > passLiveCeiling {
		setMonitorGC()
		return false
	}
	return true
}
