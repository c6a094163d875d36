package store

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
)

// cacheSizes opens n connections of s at once (the pool opens new ones)
// and returns PRAGMA cache_size of each.
func cacheSizes(t *testing.T, s *Store, n int) []int {
	t.Helper()
	ctx := context.Background()
	var conns []*sql.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	var sizes []int
	for range n {
		c, err := s.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		var v int
		if err := c.QueryRowContext(ctx, "PRAGMA cache_size").Scan(&v); err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, v)
	}
	return sizes
}

func TestCacheKiBSetsEveryConnection(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(ctx, filepath.Join(dir, "small.db"), CacheKiB(512))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// every connection the pool may hold, each opened while the others are busy
	for i, v := range cacheSizes(t, s, maxOpenConns) {
		if v != -512 {
			t.Errorf("connection %d: cache_size = %d, want -512 (512 KiB)", i, v)
		}
	}
	// and a connection opened after the pool closed its idle ones
	s.db.SetMaxIdleConns(0)
	s.db.SetMaxIdleConns(maxOpenConns)
	for i, v := range cacheSizes(t, s, 1) {
		if v != -512 {
			t.Errorf("new connection %d: cache_size = %d, want -512", i, v)
		}
	}

	d, err := Open(ctx, filepath.Join(dir, "default.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for i, v := range cacheSizes(t, d, 2) {
		if v != -2000 {
			t.Errorf("without the option, connection %d: cache_size = %d, want SQLite's -2000", i, v)
		}
	}
	// CacheKiB(0) keeps the default, and the other pragmas still apply
	z, err := Open(ctx, filepath.Join(dir, "zero.db"), CacheKiB(0))
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	if v := cacheSizes(t, z, 1)[0]; v != -2000 {
		t.Errorf("CacheKiB(0): cache_size = %d, want -2000", v)
	}
	var mode string
	if err := s.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("with CacheKiB: journal_mode = %q (%v), want wal", mode, err)
	}
}
