package store

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// TestSQLiteMutexes: once a store is open, SQLite's mutexes are the
// store's (mutex.go), not libc's pthread mutexes: SQLite hands out the
// store's static mutexes, a connection's (recursive) mutex is connMutex,
// never locked, and a fast one is a sqlMutex held by its TLS only.
func TestSQLiteMutexes(t *testing.T) {
	openTest(t) // installs the mutexes before SQLite's first connection
	if !sqlMutexesInstalled || !connMutexFree.Load() {
		t.Fatalf("SQLite did not take the store's mutexes (installed %v, initialized %v)", sqlMutexesInstalled, connMutexFree.Load())
	}
	tls := libc.NewTLS()
	defer tls.Close()
	other := libc.NewTLS()
	defer other.Close()
	for typ := int32(sqlite3.SQLITE_MUTEX_STATIC_MAIN); typ <= sqlite3.SQLITE_MUTEX_STATIC_VFS3; typ++ {
		if got, want := sqlite3.Xsqlite3_mutex_alloc(tls, typ), uintptr(unsafe.Pointer(&sqlMutexes.static[typ])); got != want {
			t.Fatalf("static mutex %d is %#x, want the store's %#x", typ, got, want)
		}
	}

	c := sqlite3.Xsqlite3_mutex_alloc(tls, sqlite3.SQLITE_MUTEX_RECURSIVE)
	if c != uintptr(unsafe.Pointer(&connMutex)) {
		t.Fatalf("a recursive mutex allocated once SQLite is initialized is %#x, not connMutex", c)
	}
	sqlite3.Xsqlite3_mutex_enter(tls, c)
	if sqlite3.Xsqlite3_mutex_try(other, c) != sqlite3.SQLITE_OK {
		t.Fatal("connMutex was locked")
	}
	sqlite3.Xsqlite3_mutex_leave(other, c)
	sqlite3.Xsqlite3_mutex_leave(tls, c)
	sqlite3.Xsqlite3_mutex_free(tls, c)

	p := sqlite3.Xsqlite3_mutex_alloc(tls, sqlite3.SQLITE_MUTEX_FAST)
	sqlMutexes.Lock()
	_, ours := sqlMutexes.live[p]
	sqlMutexes.Unlock()
	if !ours {
		t.Fatalf("a fast mutex %#x is not the store's", p)
	}
	sqlite3.Xsqlite3_mutex_enter(tls, p)
	if sqlite3.Xsqlite3_mutex_try(other, p) != sqlite3.SQLITE_BUSY {
		t.Fatal("another TLS entered a held mutex")
	}
	sqlite3.Xsqlite3_mutex_leave(tls, p)
	if sqlite3.Xsqlite3_mutex_try(other, p) != sqlite3.SQLITE_OK {
		t.Fatal("another TLS could not enter a released mutex")
	}
	sqlite3.Xsqlite3_mutex_leave(other, p)
	sqlite3.Xsqlite3_mutex_free(tls, p)
	sqlMutexes.Lock()
	_, ours = sqlMutexes.live[p]
	sqlMutexes.Unlock()
	if ours {
		t.Fatal("a freed mutex is still held")
	}

	// A recursive mutex allocated before SQLite is initialized (its own,
	// while sqlite3_initialize runs) counts its entries.
	r := &sqlMutex{recursive: true}
	rp := uintptr(unsafe.Pointer(r))
	sqlMutexEnter(tls, rp)
	sqlMutexEnter(tls, rp) // recursive
	if sqlMutexTry(other, rp) != sqlite3.SQLITE_BUSY {
		t.Fatal("another TLS entered a held recursive mutex")
	}
	sqlMutexLeave(tls, rp)
	if sqlMutexTry(other, rp) != sqlite3.SQLITE_BUSY {
		t.Fatal("another TLS entered a recursive mutex held once more")
	}
	sqlMutexLeave(tls, rp)
	if sqlMutexTry(other, rp) != sqlite3.SQLITE_OK {
		t.Fatal("another TLS could not enter a released recursive mutex")
	}
	sqlMutexLeave(other, rp)
}

// TestSQLiteMutexesConcurrent runs writers and readers on several
// connections at once (with -race: the mutexes' memory ordering).
func TestSQLiteMutexesConcurrent(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	ids := fill(t, s, 40)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range 30 {
				typ := []EventType{StopRequested, StartRequested}[i%2]
				if _, err := s.ApplyBatchNoSpecs(ctx, []Transition{{RuntimeID: ids[g*10+i%10], Type: typ}}); err != nil {
					errs <- err
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for range 30 {
				recs, err := s.Records(ctx, ids)
				if err == nil && len(recs) != len(ids) {
					err = fmt.Errorf("%d records of %d", len(recs), len(ids))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// BenchmarkSQLiteMutex is one enter and leave of an uncontended fast mutex
// (a file's), through SQLite's API as its own code calls it.
func BenchmarkSQLiteMutex(b *testing.B) {
	openTest(b)
	tls := libc.NewTLS()
	defer tls.Close()
	p := sqlite3.Xsqlite3_mutex_alloc(tls, sqlite3.SQLITE_MUTEX_FAST)
	defer sqlite3.Xsqlite3_mutex_free(tls, p)
	for b.Loop() {
		sqlite3.Xsqlite3_mutex_enter(tls, p)
		sqlite3.Xsqlite3_mutex_leave(tls, p)
	}
}
