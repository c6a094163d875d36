package store

import (
	"sync"
	"unsafe"

	"modernc.org/libc"
	"modernc.org/libc/sys/types"
	sqlite3 "modernc.org/sqlite/lib"
)

// SQLite's memory comes from modernc.org/libc's malloc, that is from
// modernc.org/memory, which rounds every allocation up to a power of two.
// A page of SQLite's page cache is one allocation of ~4.4 KB (the 4,096
// bytes of the page, SQLite's headers, and the 8 bytes of SQLite's own
// size header), so it took an 8 KiB slot: a full cache of 2,000 KiB was
// ~3.7 MiB of resident memory, and recover's caches at 100,000 workloads
// ~3.8 MiB for 2 MiB of pages (docs/performance.md, the recrss round).
//
// The store gives SQLite an allocator of its own instead (memMalloc and its
// siblings, installed by installAllocator with SQLITE_CONFIG_MALLOC before
// the process's first connection): allocations of more than 4 KiB
// and at most 5 KiB, which are the page cache's pages of 4 KiB, come from
// slabs cut in slots of their size rounded up to 64 bytes (4,416 bytes);
// every other size goes to libc's malloc as before. A slab is 256 KiB of
// libc memory, mapped, not touched: only the slots handed out become
// resident, so the memory follows the pages cached, ~4.4 KB each. A freed
// slot goes back to a free list of its size and is handed out again; slabs
// are not given back (the page caches are bounded, so are the slabs).
//
// Like SQLite's default allocator (mem1.c), each allocation starts with an
// 8-byte header holding its size (rounded up to 8), which xSize reads; a
// slot's header has slabFlag set too.

const (
	memHeader  = 8       // bytes before each allocation: its size
	slabMin    = 4 << 10 // allocations (with the header) above this...
	slabMax    = 5 << 10 // ...and up to this come from slabs
	slabGrain  = 64      // slot sizes are multiples of this
	slabFlag   = 1 << 62
	slabLevels = (slabMax - slabMin) / slabGrain
	// slabBytes is the size of a slab: libc maps 256 KiB for it (its
	// allocations above 64 KiB are mappings of a power of two, with a
	// header of 32 bytes): 59 slots of 4,416 bytes.
	slabBytes = 256<<10 - 64
)

// slotClass is the slab class of an allocation of n bytes with its header,
// or -1 when libc's malloc serves it.
func slotClass(n int) int {
	if n <= slabMin || n > slabMax {
		return -1
	}
	return (n - slabMin - 1) / slabGrain
}

// slotSize is the size of a slot of class c.
func slotSize(c int) int { return slabMin + (c+1)*slabGrain }

var slabs struct {
	mu      sync.Mutex
	free    [slabLevels]uintptr // freed slots, linked through their first word
	next    [slabLevels]uintptr // the next slot not yet handed out
	end     [slabLevels]uintptr // the end of the slab next is in
	inUse   [slabLevels]int     // slots handed out and not freed
	slabs   int                 // slabs taken from libc
	enabled bool                // SQLite took the allocator
}

// memMalloc is xMalloc.
func memMalloc(tls *libc.TLS, n int32) uintptr {
	if n <= 0 {
		return 0
	}
	size := (int(n) + 7) &^ 7
	c := slotClass(size + memHeader)
	if c < 0 {
		p := libc.Xmalloc(tls, types.Size_t(size+memHeader))
		if p == 0 {
			return 0
		}
		*(*int64)(at(p)) = int64(size)
		return p + memHeader
	}
	p := slotAlloc(tls, c)
	if p == 0 {
		return 0
	}
	*(*int64)(at(p)) = int64(size) | slabFlag
	return p + memHeader
}

// slotAlloc hands out a slot of class c: a freed one, else the next one of
// its slab, else the first of a new slab.
func slotAlloc(tls *libc.TLS, c int) uintptr {
	slabs.mu.Lock()
	defer slabs.mu.Unlock()
	if p := slabs.free[c]; p != 0 {
		slabs.free[c] = *(*uintptr)(at(p))
		slabs.inUse[c]++
		return p
	}
	sz := uintptr(slotSize(c))
	if slabs.next[c] == 0 || slabs.next[c]+sz > slabs.end[c] {
		s := libc.Xmalloc(tls, slabBytes)
		if s == 0 {
			return 0
		}
		slabs.slabs++
		slabs.next[c], slabs.end[c] = s, s+slabBytes
	}
	p := slabs.next[c]
	slabs.next[c] += sz
	slabs.inUse[c]++
	return p
}

// memFree is xFree.
func memFree(tls *libc.TLS, p uintptr) {
	if p == 0 {
		return
	}
	p -= memHeader
	h := *(*int64)(at(p))
	if h&slabFlag == 0 {
		libc.Xfree(tls, p)
		return
	}
	c := slotClass(int(h&^slabFlag) + memHeader)
	slabs.mu.Lock()
	*(*uintptr)(at(p)) = slabs.free[c]
	slabs.free[c] = p
	slabs.inUse[c]--
	slabs.mu.Unlock()
}

// memRealloc is xRealloc.
func memRealloc(tls *libc.TLS, p uintptr, n int32) uintptr {
	if p == 0 {
		return memMalloc(tls, n)
	}
	if n <= 0 {
		memFree(tls, p)
		return 0
	}
	size := (int(n) + 7) &^ 7
	h := *(*int64)(at(p - memHeader))
	old := int(h &^ slabFlag)
	if h&slabFlag == 0 && slotClass(size+memHeader) < 0 {
		q := libc.Xrealloc(tls, p-memHeader, types.Size_t(size+memHeader))
		if q == 0 {
			return 0
		}
		*(*int64)(at(q)) = int64(size)
		return q + memHeader
	}
	q := memMalloc(tls, int32(size))
	if q == 0 {
		return 0
	}
	copy(unsafe.Slice((*byte)(at(q)), min(old, size)), unsafe.Slice((*byte)(at(p)), min(old, size)))
	memFree(tls, p)
	return q
}

// at is the address p of C memory (libc's, never the Go heap's) as a
// pointer.
func at(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }

// memSize is xSize.
func memSize(tls *libc.TLS, p uintptr) int32 {
	if p == 0 {
		return 0
	}
	return int32(*(*int64)(at(p - memHeader)) &^ slabFlag)
}

// memRoundup is xRoundup.
func memRoundup(tls *libc.TLS, n int32) int32 { return (n + 7) &^ 7 }

// memInit is xInit.
func memInit(tls *libc.TLS, _ uintptr) int32 { return sqlite3.SQLITE_OK }

// memShutdown is xShutdown.
func memShutdown(tls *libc.TLS, _ uintptr) {}

// cFunc is the C function pointer of f, a function declared at top level
// (as modernc.org/sqlite's cFuncPointer: a Go func value is a pointer to
// its code pointer, which the transpiled C calls through).
func cFunc[T any](f T) uintptr {
	return *(*uintptr)(unsafe.Pointer(&struct{ f T }{f}))
}

var installAlloc sync.Once

// installAllocator gives SQLite the allocator above. SQLite takes an allocator only
// before it is initialized, that is before the process's first connection:
// open calls it before opening one. When SQLite refuses (a connection was
// opened elsewhere first) its default allocator stays, which works the same
// with more memory.
func installAllocator() {
	installAlloc.Do(func() {
		tls := libc.NewTLS()
		defer tls.Close()
		installMutexes(tls) // mutex.go
		m := libc.Xcalloc(tls, 1, types.Size_t(unsafe.Sizeof(sqlite3.Tsqlite3_mem_methods{})))
		va := libc.Xmalloc(tls, types.Size_t(unsafe.Sizeof(uintptr(0))))
		if m == 0 || va == 0 {
			libc.Xfree(tls, m)
			libc.Xfree(tls, va)
			return
		}
		defer libc.Xfree(tls, va)
		mm := (*sqlite3.Tsqlite3_mem_methods)(at(m))
		mm.FxMalloc = cFunc(memMalloc)
		mm.FxFree = cFunc(memFree)
		mm.FxRealloc = cFunc(memRealloc)
		mm.FxSize = cFunc(memSize)
		mm.FxRoundup = cFunc(memRoundup)
		mm.FxInit = cFunc(memInit)
		mm.FxShutdown = cFunc(memShutdown)
		// SQLite copies the methods: m is not needed once it returns.
		rc := sqlite3.Xsqlite3_config(tls, sqlite3.SQLITE_CONFIG_MALLOC, libc.VaList(va, m))
		libc.Xfree(tls, m)
		slabs.mu.Lock()
		slabs.enabled = rc == sqlite3.SQLITE_OK
		slabs.mu.Unlock()
		// SQLite initialized here, once: the recursive mutexes it
		// allocates from now on are its connections' (connMutex).
		if sqlMutexesInstalled && sqlite3.Xsqlite3_initialize(tls) == sqlite3.SQLITE_OK {
			connMutexFree.Store(true)
		}
	})
}

// slabStats reports the slots in use and their bytes, and the slabs taken
// from libc (tests).
func slabStats() (slots, bytes, nslabs int, enabled bool) {
	slabs.mu.Lock()
	defer slabs.mu.Unlock()
	for c, n := range slabs.inUse {
		slots += n
		bytes += n * slotSize(c)
	}
	return slots, bytes, slabs.slabs, slabs.enabled
}
