package monitor

import (
	"fmt"
	"sync"
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/gobrave/kubectl-gobrave/pkg/runtimeid"
)

// TestMemoryLimitFor: the limit leaves perItem bytes for each item held,
// at most a step more, and grows with the items.
func TestMemoryLimitFor(t *testing.T) {
	const base, per = 24 << 20, 512
	prev := int64(0)
	for _, n := range []int64{0, 1, 1000, 1024, 5000, 100_000, 1_000_000} {
		limit, upTo := MemoryLimitFor(base, per, n)
		if upTo <= n {
			t.Errorf("n=%d: next step at %d, want above n", n, upTo)
		}
		if want := base + per*n; limit < want {
			t.Errorf("n=%d: limit %d below base+perItem*n = %d", n, limit, want)
		}
		if most := base + per*(n+max(n/16, 1024)); limit > most {
			t.Errorf("n=%d: limit %d above base+perItem*(n+step) = %d", n, limit, most)
		}
		if limit < prev {
			t.Errorf("n=%d: limit %d below the one of fewer items (%d)", n, limit, prev)
		}
		prev = limit
	}
}

// TestMemoryLimitFollowsMonitor: once enabled, the limit is raised as a
// Monitor gets IDs and its informers objects, never lowered as they go,
// and not set at every item.
func TestMemoryLimitFollowsMonitor(t *testing.T) {
	var mu sync.Mutex
	var sets []int64
	memLimiter.mu.Lock()
	savedBase, savedPer, savedSet, savedLimit := memLimiter.base, memLimiter.perItem, memLimiter.set, memLimiter.limit
	memLimiter.set = func(l int64) int64 {
		mu.Lock()
		defer mu.Unlock()
		sets = append(sets, l)
		return 0
	}
	memLimiter.limit = 0
	memLimiter.mu.Unlock()
	t.Cleanup(func() {
		memNext.Store(0)
		memLimiter.mu.Lock()
		memLimiter.base, memLimiter.perItem, memLimiter.set, memLimiter.limit = savedBase, savedPer, savedSet, savedLimit
		memLimiter.mu.Unlock()
	})
	last := func() int64 {
		mu.Lock()
		defer mu.Unlock()
		if len(sets) == 0 {
			return 0
		}
		return sets[len(sets)-1]
	}
	const base, per = 8 << 20, 1000
	subs0, objs0 := memSubs.Load(), memObjects.Load()
	EnableMemoryLimit(base, per)
	if got := last(); got < base {
		t.Fatalf("enabled: limit %d, want at least the base %d", got, base)
	}

	m := New(fake.NewClientset(), nil, Options{})
	const n = 20_000
	for i := 0; i < n; i += 500 {
		ids := make([]runtimeid.ID, 0, 500)
		for j := i; j < i+500; j++ {
			ids = append(ids, jobID("ns", fmt.Sprintf("j%d", j)))
		}
		m.Add(ids...)
	}
	held := max(subs0, objs0) + n
	if got := last(); got < base+per*held {
		t.Errorf("%d IDs added: limit %d, want at least %d", n, got, base+per*held)
	}
	mu.Lock()
	nsets := len(sets)
	mu.Unlock()
	if nsets > 40 {
		t.Errorf("the limit was set %d times for %d IDs, want it set in steps", nsets, n)
	}
	// The informers' objects count when there are more of them than IDs.
	for i := 0; i < 2*n; i++ {
		memAdd(&memObjects, 1)
	}
	if got, want := last(), base+per*(objs0+2*n); got < want {
		t.Errorf("%d objects cached: limit %d, want at least %d", 2*n, got, want)
	}
	top := last()
	for i := 0; i < 2*n; i++ {
		memAdd(&memObjects, -1)
	}
	m.mu.Lock()
	for id := range m.subs {
		m.finishLocked(id, true)
	}
	m.mu.Unlock()
	memAdd(&memSubs, 0)
	if got := last(); got != top {
		t.Errorf("items gone: limit %d, want it kept at %d", got, top)
	}
}
