package monitor

import (
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// The soft memory limit of a monitoring process (issue 16). A following
// monitor's live heap grows with what it holds: a subscription per ID and
// an entry per object in the informers' caches. GOGC alone lets the heap
// reach 1 + GOGC/100 times the live heap of the last cycle, and during the
// initial sync that live heap includes the sync's own garbage in flight, so
// the peak is well above what is kept. A fixed soft limit caps that, but
// once the kept heap passes it the collector would run back to back. The
// limit set here follows the size instead: base plus perItem bytes for
// each item held, an item being a subscription or a cached object,
// whichever count is larger (an ID's subscription and its object are one
// item). It is only raised, in steps, as the counts grow (the heap
// runtime's own goal still applies below it), and never set when the user
// set GOMEMLIMIT.

// memItems counts what the monitors of this process hold.
var (
	memSubs    atomic.Int64 // subscriptions of every Monitor
	memObjects atomic.Int64 // entries of every informer's cache
	memNext    atomic.Int64 // the count at which the limit is raised next; 0 while off
	memLimiter limiter
)

type limiter struct {
	mu      sync.Mutex
	base    int64
	perItem int64
	set     func(int64) int64 // debug.SetMemoryLimit; replaced in tests
	limit   int64             // the limit set, 0 none yet
}

// EnableMemoryLimit makes the monitors of this process keep the Go
// runtime's soft memory limit at base + perItem × the items they hold
// (MemoryLimitFor), raised as they grow. The caller checks GOMEMLIMIT: a
// limit the user set wins.
func EnableMemoryLimit(base, perItem int64) {
	memLimiter.mu.Lock()
	memLimiter.base, memLimiter.perItem = base, perItem
	if memLimiter.set == nil {
		memLimiter.set = debug.SetMemoryLimit
	}
	memLimiter.mu.Unlock()
	memNext.Store(-1) // on: the next count raises it
	memGrew()
}

// MemoryLimitFor is the soft limit for n items held: base + perItem × n,
// n rounded up to a step (1/16 of it, at least 1,024) so that the limit
// is set about 16 times as n grows tenfold, not at every item.
func MemoryLimitFor(base, perItem, n int64) (limit, upTo int64) {
	step := max(n/16, 1024)
	upTo = (n/step + 1) * step
	return base + perItem*upTo, upTo
}

// memAdd counts d items more (or fewer) of c, raising the limit when the
// count passed the last step.
func memAdd(c *atomic.Int64, d int64) {
	v := c.Add(d)
	if next := memNext.Load(); next != 0 && v > next {
		memGrew()
	}
}

// memGrew raises the limit to the current counts.
func memGrew() {
	l := &memLimiter
	l.mu.Lock()
	defer l.mu.Unlock()
	n := max(memSubs.Load(), memObjects.Load(), 0)
	limit, upTo := MemoryLimitFor(l.base, l.perItem, n)
	if limit > l.limit {
		l.limit = limit
		l.set(limit)
	}
	memNext.Store(upTo)
}
