// Package store records the workloads kubectl-gobrave manages, their event
// history and the monitor leases in a local SQLite database (modernc.org/sqlite,
// no cgo). It is the only place SQL lives.
//
// Several kubectl-gobrave processes may use the same file at once: writes run
// in BEGIN IMMEDIATE transactions under a busy timeout (and are retried on
// SQLITE_BUSY), the journal is WAL, and observed events are idempotent through
// a unique index, so two monitors seeing the same thing record it once.
package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// ErrNewerSchema is wrapped when the database was written by a newer
// kubectl-gobrave whose schema this binary does not know.
var ErrNewerSchema = errors.New("state database schema is newer than this binary")

// ErrCorrupt is wrapped when the file is not an SQLite database or is damaged.
var ErrCorrupt = errors.New("state database is corrupt")

const maxOpenConns = 4

// waits are how long a store waits for other processes' locks.
type waits struct {
	// busy is SQLite's busy_timeout: how long a statement waits for a lock.
	busy time.Duration
	// retries is how many times a write transaction that still failed with
	// SQLITE_BUSY after the busy timeout is tried again.
	retries int
	// migrate is how long Open keeps trying a migration that SQLite answers
	// with SQLITE_BUSY at once (see migrateRetrying). 10 s was too short at
	// load 13: one of 8 processes opening a new file (TestConcurrentProcesses,
	// -race) gave up with "database is locked" while the others migrated.
	migrate time.Duration
	// onRetry, when set, is called on every retry (tests).
	onRetry func()
}

var defaultWaits = waits{busy: 10 * time.Second, retries: 4, migrate: 30 * time.Second}

// Retries counts the attempts a store made again after SQLITE_BUSY, by path.
// The multi-process tests read them to show that the paths ran.
type Retries struct {
	Migrate int64 `json:"migrate"`
	Write   int64 `json:"write"`
}

// Store is an open state database. It is safe for concurrent use.
type Store struct {
	db   *sql.DB
	path string
	host string // os.Hostname, "" when unknown

	// writeMu serialises this process's write transactions so that they
	// queue in Go rather than in SQLite's sleeping busy handler; other
	// processes are kept out by BEGIN IMMEDIATE and busy_timeout.
	writeMu sync.Mutex

	waits   waits
	retried struct{ migrate, write atomic.Int64 }

	now func() time.Time // the clock, replaced in tests

	stmtMu   sync.Mutex
	readRecs [4]*sql.Stmt         // ApplyBatch's record read, without and with the spec, then with the cluster (see readRecords)
	stmts    map[string]*sql.Stmt // ApplyBatch's event inserts and record writes, by their text (see stmt)
}

// Retries reports how often this store tried again after SQLITE_BUSY.
func (s *Store) Retries() Retries {
	return Retries{Migrate: s.retried.migrate.Load(), Write: s.retried.write.Load()}
}

// Open opens the state database at path, creating it (folder mode 0700,
// file mode 0600) and applying the embedded migrations when needed. Options
// change its connections' settings (CacheKiB).
func Open(ctx context.Context, path string, opts ...Option) (*Store, error) {
	return open(ctx, path, defaultWaits, opts...)
}

func open(ctx context.Context, path string, w waits, opts ...Option) (*Store, error) {
	if path == "" {
		return nil, errors.New("open state database: empty path")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create the state database folder: %w (fix its permissions or point --state-db elsewhere)", err)
	}
	if err := unsafeError(CheckFiles(path)); err != nil {
		return nil, err
	}
	if err := precheck(path); err != nil {
		return nil, err
	}
	dsn, err := dataSourceName(path, w.busy)
	if err != nil {
		return nil, fmt.Errorf("open state database %s: %w", path, err)
	}
	dsn = withOptions(dsn, opts)
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open state database %s: %w", path, err)
	}
	db.SetMaxOpenConns(maxOpenConns)
	db.SetMaxIdleConns(maxOpenConns)
	db.SetConnMaxIdleTime(time.Minute)

	host, _ := os.Hostname()
	s := &Store{db: db, path: path, host: host, waits: w, now: time.Now}
	if err := s.migrateRetrying(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// migrateRetrying runs the migrations, trying again while SQLite answers
// SQLITE_BUSY without waiting: a connection that finds another process
// switching a new file to WAL, or recovering its WAL, gets BUSY at once,
// before the busy timeout applies (seen with 8 processes opening a new file).
func (s *Store) migrateRetrying(ctx context.Context) error {
	delay := 10 * time.Millisecond
	deadline := time.Now().Add(s.waits.migrate)
	for {
		err := s.migrate(ctx)
		if err == nil || !isBusy(err) || time.Now().After(deadline) {
			return err
		}
		s.retried.migrate.Add(1)
		if s.waits.onRetry != nil {
			s.waits.onRetry()
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		delay = min(2*delay, 500*time.Millisecond)
	}
}

// precheck creates the file with mode 0600 when missing, and refuses what
// cannot be opened for writing or is plainly not an SQLite database, naming
// the file; SQLite's own errors on such files are less helpful. It opens
// with O_NOFOLLOW and judges the open file (fstat), so a link or a foreign
// file put there after CheckFiles ran is refused too.
func precheck(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|noFollow, 0o600)
	if err != nil {
		if fi, lerr := os.Lstat(path); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return unsafeError([]Finding{judgeFile(path, fi)})
		}
		if errors.Is(err, fs.ErrPermission) {
			return fmt.Errorf("state database %s is not writable: %w (fix its permissions or point --state-db elsewhere)", path, err)
		}
		return fmt.Errorf("open state database %s: %w (point --state-db elsewhere)", path, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && hasOwners {
		if err := unsafeError([]Finding{judgeFile(path, fi)}); err != nil {
			return err
		}
	}
	header := make([]byte, 100)
	n, err := io.ReadFull(f, header)
	switch {
	case n == 0 && errors.Is(err, io.EOF):
		return nil // a new, empty database
	case err != nil && !errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("read state database %s: %w", path, err)
	case n < len(header) || !bytes.HasPrefix(header, []byte("SQLite format 3\x00")):
		return &dbError{
			is:  ErrCorrupt,
			msg: fmt.Sprintf("state database %s is not an SQLite database: move it aside or point --state-db elsewhere", path),
		}
	}
	return nil
}

// dataSourceName builds a file: URI for path with the connection settings.
func dataSourceName(path string, busy time.Duration) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	p := filepath.ToSlash(abs)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // C:/x on windows
	}
	u := url.URL{Scheme: "file", Path: p}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "foreign_keys(1)")
	// A checkpoint every 8,000 pages (32 MiB of WAL) rather than SQLite's
	// 1,000: the monitor's batches rewrite the same index pages, and each
	// checkpoint copies a page once however often it changed since the last
	// (ApplyBatch ~25 % faster, docs/performance.md). The file is cut back
	// to 64 MiB after a checkpoint.
	q.Add("_pragma", "wal_autocheckpoint(8000)")
	q.Add("_pragma", "journal_size_limit(67108864)")
	// SQLite's own page cache (2,000 KiB a connection) is kept: 512 KiB
	// saved about 5 MiB of recover's peak RSS on the generated server at 100,000
	// but cost ApplyBatch about 10-20 % (3 interleaved pairs, idle:
	// docs/performance-history.md, "recovermem").
	q.Set("_txlock", "immediate")
	return u.String() + "?" + q.Encode(), nil
}

// Path returns the file the store was opened from.
func (s *Store) Path() string { return s.path }

// Close closes the database.
func (s *Store) Close() error {
	s.stmtMu.Lock()
	for _, st := range s.stmts {
		st.Close()
	}
	s.stmts = nil
	for i, st := range s.readRecs {
		if st != nil {
			st.Close()
			s.readRecs[i] = nil
		}
	}
	s.stmtMu.Unlock()
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close state database %s: %w", s.path, err)
	}
	return nil
}

// stmt returns the statement q, prepared on first use and kept until
// Close (each connection prepares it once, see sql.Tx.StmtContext).
func (s *Store) stmt(ctx context.Context, q string) (*sql.Stmt, error) {
	s.stmtMu.Lock()
	defer s.stmtMu.Unlock()
	if st := s.stmts[q]; st != nil {
		return st, nil
	}
	st, err := s.db.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	if s.stmts == nil {
		s.stmts = map[string]*sql.Stmt{}
	}
	s.stmts[q] = st
	return st, nil
}

// SchemaVersion returns the schema version recorded in the file (PRAGMA user_version).
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	if err := s.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return 0, s.fail("read schema version", err)
	}
	return v, nil
}

// IntegrityCheck runs PRAGMA integrity_check and wraps ErrCorrupt when it
// finds a problem.
func (s *Store) IntegrityCheck(ctx context.Context) error {
	rows, err := s.db.QueryContext(ctx, "PRAGMA integrity_check")
	if err != nil {
		return s.fail("integrity check", err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return s.fail("integrity check", err)
		}
		if line != "ok" {
			problems = append(problems, line)
		}
	}
	if err := rows.Err(); err != nil {
		return s.fail("integrity check", err)
	}
	if len(problems) > 0 {
		return &dbError{
			is: ErrCorrupt,
			msg: fmt.Sprintf("state database %s failed its integrity check (%s): move it aside or point --state-db elsewhere",
				s.path, strings.Join(problems, "; ")),
		}
	}
	return nil
}

// dbError is an error with a message of its own that matches a sentinel and
// keeps its cause.
type dbError struct {
	is    error
	msg   string
	cause error
}

func (e *dbError) Error() string { return e.msg }

func (e *dbError) Unwrap() []error {
	if e.cause == nil {
		return []error{e.is}
	}
	return []error{e.is, e.cause}
}

// notFoundError names the missing runtime ID.
type notFoundError struct{ id string }

func (e *notFoundError) Error() string {
	return fmt.Sprintf("runtime ID %q is not in the state database (see 'kubectl gobrave ps -a')", e.id)
}

func (e *notFoundError) Unwrap() error { return ErrNotFound }

// sqliteCode returns the primary result code of an SQLite error, 0 for other errors.
func sqliteCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() & 0xff
	}
	return 0
}

func isBusy(err error) bool {
	c := sqliteCode(err)
	return c == sqlite3.SQLITE_BUSY || c == sqlite3.SQLITE_LOCKED
}

// fail turns an error from SQLite into one that names the file and says what
// to do; errors of this package (not found, validation) pass unchanged.
func (s *Store) fail(op string, err error) error {
	switch sqliteCode(err) {
	case 0:
		var de *dbError
		var nf *notFoundError
		if errors.As(err, &de) || errors.As(err, &nf) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		return fmt.Errorf("%s: %w", op, err)
	case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return &dbError{
			is:    ErrCorrupt,
			msg:   fmt.Sprintf("state database %s is damaged or not a database (%v): move it aside or point --state-db elsewhere", s.path, err),
			cause: err,
		}
	case sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM, sqlite3.SQLITE_CANTOPEN:
		return fmt.Errorf("state database %s is not writable (%w): fix the permissions of the file and its folder or point --state-db elsewhere", s.path, err)
	case sqlite3.SQLITE_FULL:
		return fmt.Errorf("state database %s: %s: %w (free some disk space)", s.path, op, err)
	default:
		return fmt.Errorf("state database %s: %s: %w", s.path, op, err)
	}
}

// write runs fn in an immediate transaction, retrying it when SQLite still
// reports SQLITE_BUSY after the busy timeout. fn may run more than once and
// must not keep results of a failed attempt.
func (s *Store) write(ctx context.Context, fn func(*sql.Tx) error) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	delay := 20 * time.Millisecond
	for attempt := 0; ; attempt++ {
		err := runTx(ctx, s.db, fn)
		if err == nil || !isBusy(err) || attempt == s.waits.retries {
			return err
		}
		s.retried.write.Add(1)
		if s.waits.onRetry != nil {
			s.waits.onRetry()
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		delay *= 2
	}
}

// beginner is a *sql.DB or a *sql.Conn.
type beginner interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// runTx runs fn in a transaction of db (BEGIN IMMEDIATE, see _txlock):
// it commits when fn returns nil and rolls back otherwise.
func runTx(ctx context.Context, db beginner, fn func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil) // BEGIN IMMEDIATE (_txlock)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// Time is stored as unix nanoseconds.
func toDB(t time.Time) int64 { return t.UnixNano() }

func fromDB(n int64) time.Time { return time.Unix(0, n).UTC() }
