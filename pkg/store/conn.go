package store

import (
	"context"
	"fmt"
	"net/url"
)

// Option changes how Open sets up the store's connections.
type Option func(*options)

// options are the settings Options change.
type options struct {
	// cacheKiB, when > 0, is SQLite's page cache of each connection in KiB
	// (PRAGMA cache_size(-cacheKiB)); 0 keeps SQLite's default, 2,000 KiB.
	cacheKiB int
}

// CacheKiB sets SQLite's page cache to kib KiB on every connection the store
// opens (PRAGMA cache_size, run on each new connection: the pool opens and
// closes connections as it needs them). Each connection has a cache of its
// own, anonymous memory that grows to the limit as pages are read. A
// process that follows the database for a long time with a small heap (the
// following monitor) may want less than the default 2,000 KiB; a process
// that mostly writes should keep it: 512 KiB cost ApplyBatch 10-20 %
// (docs/performance-history.md, "recovermem"). kib <= 0 keeps the default.
func CacheKiB(kib int) Option {
	return func(o *options) { o.cacheKiB = max(kib, 0) }
}

// withOptions adds to the data source name dsn (dataSourceName's) the
// pragmas of opts, which the driver runs on each new connection. Open calls
// it before it opens a connection, so it gives SQLite its allocator first
// (installAllocator, pcache.go).
func withOptions(dsn string, opts []Option) string {
	installAllocator()
	var o options
	for _, fn := range opts {
		if fn != nil {
			fn(&o)
		}
	}
	if o.cacheKiB == 0 {
		return dsn
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("cache_size(%d)", -o.cacheKiB))
	return dsn + "&" + q.Encode()
}

// CacheKiBOf reads the page cache size of one of the store's connections,
// in KiB (PRAGMA cache_size: negative is KiB, positive pages of 4 KiB).
func (s *Store) CacheKiBOf(ctx context.Context) (int, error) {
	var v int
	if err := s.db.QueryRowContext(ctx, "PRAGMA cache_size").Scan(&v); err != nil {
		return 0, s.fail("read cache_size", err)
	}
	if v < 0 {
		return -v, nil
	}
	return v * 4, nil
}
