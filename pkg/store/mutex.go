package store

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"modernc.org/libc"
	"modernc.org/libc/sys/types"
	sqlite3 "modernc.org/sqlite/lib"
)

// SQLite enters a mutex in every call of its API on a connection opened
// SQLITE_OPEN_FULLMUTEX (as modernc.org/sqlite opens them all): each bind,
// step, reset and column read, and the page cache's and allocator's
// mutexes on each page fetched and each allocation. On Linux,
// modernc.org/sqlite leaves those mutexes to modernc.org/libc's pthread
// mutexes, which find the Go mutex of a C mutex in a sharded map under
// another lock: two locks and a map lookup per enter, one lock and a lookup
// per leave, about a tenth of ApplyBatch's CPU (pprof:
// Xpthread_mutex_lock and _unlock). SQLite enters ~114 mutexes per
// transition of ApplyBatchNoSpecs in batches of 250 (84 of them its
// connection's and the file's, 30 static: the page cache's, the VFS's).
//
// The store gives SQLite the mutexes modernc.org/sqlite itself installs on
// its other platforms (lib/mutex.go, built !linux; the same methods, the
// same semantics: a mutex is owned by a libc TLS, recursive mutexes count
// their entries): a sync.Mutex per SQLite mutex, found from SQLite's pointer
// directly. installAllocator installs them with SQLITE_CONFIG_MUTEX before
// the process's first connection, as it does the allocator. The mutexes are
// Go memory, kept reachable from sqlMutexes until SQLite frees them.
//
// Measured (interleaved A/B, load 9-15, wbatch branch): an enter and leave
// 144-291 ns -> 30-83 ns (BenchmarkSQLiteMutex); BenchmarkRecoverPass
// median 26,350 -> 30,400 transitions per CPU-second, 9 of 10 pairs better,
// wall better in 9 of 10; BenchmarkApplyBatch no difference shown (8 pairs,
// medians ~19,000 both).

type sqlMutex struct {
	mu        sync.Mutex
	cnt       int32 // entries of the owner (recursive)
	id        atomic.Int32
	recursive bool
	free      bool // connMutex: never locked
}

// connMutex is the mutex of every connection (SQLite's db->mutex) opened
// once SQLite is initialized: it is never locked.
//
// modernc.org/sqlite opens every connection SQLITE_OPEN_FULLMUTEX, so SQLite
// enters the connection's mutex in each call of its API: each bind, step,
// reset, and the three calls that read a column (recover's record read:
// ~60 enters and leaves a record, a third of its CPU in BenchmarkReadBatch).
// That mutex serializes the threads of one connection, and a connection of
// this store never has two: database/sql holds its driverConn's lock over
// every call into a connection and everything made from it (statements,
// rows, transactions), and modernc.org/sqlite's own goroutine only calls
// sqlite3_interrupt, which SQLite makes safe from any thread without the
// mutex. That is SQLite's multi-thread mode (SQLITE_OPEN_NOMUTEX), which
// the driver cannot be asked for.
//
// Only connections get it: SQLite allocates a recursive mutex for each
// connection (openDatabase) and, while sqlite3_initialize runs, one for
// itself (pInitMutex, freed when it returns); installAllocator initializes
// SQLite before setting connMutexFree, so every recursive mutex allocated
// after is a connection's. The mutexes shared between connections (the
// file's, the page cache's, the VFS's: fast and static) stay real.
var connMutex = sqlMutex{recursive: true, free: true}

// connMutexFree is set once SQLite is initialized (installAllocator).
var connMutexFree atomic.Bool

var sqlMutexes = struct {
	sync.Mutex
	live map[uintptr]*sqlMutex // the dynamic mutexes SQLite holds
	// static are SQLITE_MUTEX_STATIC_MAIN (2) to SQLITE_MUTEX_STATIC_VFS3 (13).
	static [sqlite3.SQLITE_MUTEX_STATIC_VFS3 + 1]sqlMutex
}{live: map[uintptr]*sqlMutex{}}

func mutexOf(p uintptr) *sqlMutex { return (*sqlMutex)(at(p)) }

func sqlMutexInit(*libc.TLS) int32 { return sqlite3.SQLITE_OK }

func sqlMutexEnd(*libc.TLS) int32 { return sqlite3.SQLITE_OK }

func sqlMutexAlloc(_ *libc.TLS, typ int32) uintptr {
	switch {
	case typ == sqlite3.SQLITE_MUTEX_RECURSIVE && connMutexFree.Load():
		return uintptr(unsafe.Pointer(&connMutex))
	case typ == sqlite3.SQLITE_MUTEX_FAST || typ == sqlite3.SQLITE_MUTEX_RECURSIVE:
		m := &sqlMutex{recursive: typ == sqlite3.SQLITE_MUTEX_RECURSIVE}
		p := uintptr(unsafe.Pointer(m))
		sqlMutexes.Lock()
		sqlMutexes.live[p] = m
		sqlMutexes.Unlock()
		return p
	case typ >= sqlite3.SQLITE_MUTEX_STATIC_MAIN && typ <= sqlite3.SQLITE_MUTEX_STATIC_VFS3:
		// Static mutexes are recursive in SQLite's pthread implementation
		// only when asked; these never are.
		return uintptr(unsafe.Pointer(&sqlMutexes.static[typ]))
	}
	return 0
}

func sqlMutexFree(_ *libc.TLS, p uintptr) {
	if mutexOf(p).free {
		return
	}
	sqlMutexes.Lock()
	delete(sqlMutexes.live, p)
	sqlMutexes.Unlock()
}

func sqlMutexEnter(tls *libc.TLS, p uintptr) {
	if p == 0 {
		return
	}
	m := mutexOf(p)
	if m.free {
		return
	}
	if m.recursive && m.id.Load() == tls.ID {
		m.cnt++ // ours: only we write id and cnt
		return
	}
	m.mu.Lock()
	m.id.Store(tls.ID)
	m.cnt = 1
}

func sqlMutexTry(tls *libc.TLS, p uintptr) int32 {
	if p == 0 {
		return sqlite3.SQLITE_OK
	}
	m := mutexOf(p)
	if m.free {
		return sqlite3.SQLITE_OK
	}
	if m.recursive && m.id.Load() == tls.ID {
		m.cnt++
		return sqlite3.SQLITE_OK
	}
	if !m.mu.TryLock() {
		return sqlite3.SQLITE_BUSY
	}
	m.id.Store(tls.ID)
	m.cnt = 1
	return sqlite3.SQLITE_OK
}

func sqlMutexLeave(_ *libc.TLS, p uintptr) {
	if p == 0 {
		return
	}
	m := mutexOf(p)
	if m.free {
		return
	}
	if m.cnt--; m.cnt > 0 {
		return
	}
	m.id.Store(0)
	m.mu.Unlock()
}

func sqlMutexHeld(tls *libc.TLS, p uintptr) int32 {
	if p == 0 || mutexOf(p).free {
		return 1
	}
	return libc.Bool32(mutexOf(p).id.Load() == tls.ID)
}

func sqlMutexNotheld(tls *libc.TLS, p uintptr) int32 {
	if p == 0 || mutexOf(p).free {
		return 1
	}
	return libc.Bool32(mutexOf(p).id.Load() != tls.ID)
}

// sqlMutexesInstalled reports whether SQLite took the mutexes above (tests).
var sqlMutexesInstalled bool

// installMutexes gives SQLite the mutexes above (see installAllocator,
// which calls it first). When SQLite refuses, its own stay.
func installMutexes(tls *libc.TLS) {
	m := libc.Xcalloc(tls, 1, types.Size_t(unsafe.Sizeof(sqlite3.Tsqlite3_mutex_methods{})))
	va := libc.Xmalloc(tls, types.Size_t(unsafe.Sizeof(uintptr(0))))
	defer libc.Xfree(tls, m)
	defer libc.Xfree(tls, va)
	if m == 0 || va == 0 {
		return
	}
	mm := (*sqlite3.Tsqlite3_mutex_methods)(at(m))
	mm.FxMutexInit = cFunc(sqlMutexInit)
	mm.FxMutexEnd = cFunc(sqlMutexEnd)
	mm.FxMutexAlloc = cFunc(sqlMutexAlloc)
	mm.FxMutexFree = cFunc(sqlMutexFree)
	mm.FxMutexEnter = cFunc(sqlMutexEnter)
	mm.FxMutexTry = cFunc(sqlMutexTry)
	mm.FxMutexLeave = cFunc(sqlMutexLeave)
	mm.FxMutexHeld = cFunc(sqlMutexHeld)
	mm.FxMutexNotheld = cFunc(sqlMutexNotheld)
	// SQLite copies the methods.
	sqlMutexesInstalled = sqlite3.Xsqlite3_config(tls, sqlite3.SQLITE_CONFIG_MUTEX, libc.VaList(va, m)) == sqlite3.SQLITE_OK
}
