package store

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"unsafe"

	"modernc.org/libc"
)

// TestPageCacheSlots reads a table of ~1,000 pages into one connection's
// page cache and checks that the pages sit in slabs at ~4.4 KB each, where
// libc's malloc gives such an allocation an 8 KiB slot.
func TestPageCacheSlots(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, _, _, on := slabStats(); !on {
		t.Fatal("SQLite did not take the store's allocator (was a connection opened before installAllocator?)")
	}
	c, err := s.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, q := range []string{
		"PRAGMA temp.cache_size = -8000",
		"CREATE TEMP TABLE filler(x BLOB)",
		"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 1000) INSERT INTO filler SELECT randomblob(3500) FROM n",
	} {
		if _, err := c.ExecContext(ctx, q); err != nil {
			t.Fatal(q, err)
		}
	}
	var pages int
	if err := c.QueryRowContext(ctx, "SELECT count(*) FROM filler WHERE length(x) = 3500").Scan(&pages); err != nil || pages != 1000 {
		t.Fatalf("read %d rows (%v), want 1000", pages, err)
	}
	slots, bytes, nslabs, _ := slabStats()
	if slots < 1000 {
		t.Fatalf("%d slab slots in use, want at least one for each of the 1,000 cached pages", slots)
	}
	per := bytes / slots
	t.Logf("%d slots of %d bytes on average in %d slabs", slots, per, nslabs)
	if per > 4608 {
		t.Errorf("a cached page takes %d bytes, want at most 4,608 (4 KiB, SQLite's headers and a 64-byte grain)", per)
	}
	if nslabs*slabBytes > bytes+slabBytes*slabLevels {
		t.Errorf("%d slabs of 256 KiB for %d bytes of slots", nslabs, bytes)
	}
	// what libc's malloc would have given the same allocation
	tls := libc.NewTLS()
	defer tls.Close()
	p := libc.Xmalloc(tls, 4096+memHeader+300)
	defer libc.Xfree(tls, p)
	if u := int(libc.UsableSize(p)); u < 8192 {
		t.Logf("libc's malloc now gives a page %d bytes: the slabs may no longer be needed", u)
	}
}

// TestMemMethods allocates, grows, shrinks and frees blocks of sizes on
// both sides of the slab range and checks their contents and sizes.
func TestMemMethods(t *testing.T) {
	tls := libc.NewTLS()
	defer tls.Close()
	sizes := []int32{1, 8, 100, 4000, 4088, 4089, 4400, 4472, 4473, 5112, 5113, 6000, 20000}
	for _, a := range sizes {
		for _, b := range sizes {
			p := memMalloc(tls, a)
			if p == 0 || p%8 != 0 {
				t.Fatalf("malloc(%d) = %#x", a, p)
			}
			if got, want := memSize(tls, p), (a+7)&^7; got != want {
				t.Fatalf("size of malloc(%d) = %d, want %d", a, got, want)
			}
			fillC(p, int(a), byte(a))
			q := memRealloc(tls, p, b)
			if q == 0 {
				t.Fatalf("realloc(%d -> %d) failed", a, b)
			}
			if got, want := memSize(tls, q), (b+7)&^7; got != want {
				t.Fatalf("size after realloc(%d -> %d) = %d, want %d", a, b, got, want)
			}
			n := int(min(a, b))
			if !bytes.Equal(unsafe.Slice((*byte)(at(q)), n), bytes.Repeat([]byte{byte(a)}, n)) {
				t.Fatalf("realloc(%d -> %d) lost the contents", a, b)
			}
			memFree(tls, q)
		}
	}
	// a freed slot is handed out again
	p := memMalloc(tls, 5000) // a size SQLite does not ask for
	memFree(tls, p)
	if q := memMalloc(tls, 5000); q != p {
		t.Errorf("malloc after free = %#x, want the freed slot %#x", q, p)
	} else {
		memFree(tls, q)
	}
	if memMalloc(tls, 0) != 0 || memSize(tls, 0) != 0 {
		t.Error("malloc(0) or size(0) is not 0")
	}
}

func fillC(p uintptr, n int, v byte) {
	b := unsafe.Slice((*byte)(at(p)), n)
	for i := range b {
		b[i] = v
	}
}
