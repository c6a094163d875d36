package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// migrationFS holds the schema migrations, one file per version named
// NNNN_description.sql, numbered from 1 without gaps. A migration is never
// edited once released: add the next one instead.
//
//go:embed migrations/*.sql
var migrationFS embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

// migrations is the parsed, ordered content of migrationFS.
var migrations = mustLoadMigrations()

// schemaLatest is the schema version this binary writes.
var schemaLatest = len(migrations)

func mustLoadMigrations() []migration {
	ms, err := loadMigrations(migrationFS)
	if err != nil {
		panic(err) // the embedded files are fixed at build time; the tests load them
	}
	return ms
}

func loadMigrations(fsys fs.FS) ([]migration, error) {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, name := range names {
		base := path.Base(name)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v < 1 {
			return nil, fmt.Errorf("migration %s: name must start with a version number and '_'", name)
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: base, sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: expected version %d", m.name, i+1)
		}
	}
	return ms, nil
}

// migrate brings the schema to schemaLatest in one transaction, and refuses a
// database written by a newer binary.
func (s *Store) migrate(ctx context.Context) error {
	v, err := s.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	if v == schemaLatest {
		return nil // the common case: no write at all
	}
	if err := s.checkNotNewer(v); err != nil {
		return err
	}
	err = s.withoutForeignKeys(ctx, func(tx *sql.Tx) error {
		// Read again under the write lock: another process may have
		// migrated in the meantime.
		var cur int
		if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&cur); err != nil {
			return err
		}
		if err := s.checkNotNewer(cur); err != nil {
			return err
		}
		for _, m := range migrations[cur:] {
			if _, err := tx.ExecContext(ctx, m.sql); err != nil {
				return fmt.Errorf("migration %s: %w", m.name, err)
			}
		}
		// PRAGMA takes no parameters; the value is our own integer.
		_, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", schemaLatest))
		return err
	})
	if err != nil {
		return s.fail("migrate schema", err)
	}
	return nil
}

// withoutForeignKeys runs fn in a write transaction (BEGIN IMMEDIATE) on a
// connection of its own with foreign keys off, as SQLite's procedure for
// rebuilding a table asks: migration 7 drops the old workloads table, which
// with foreign keys on would delete, or fail on, the rows that reference it
// (events, clusters, revisions). Foreign keys cannot be switched inside a
// transaction, so the connection switches them off before BEGIN and on
// again before it goes back to the pool; a connection that cannot be
// switched back is discarded.
func (s *Store) withoutForeignKeys(ctx context.Context, fn func(*sql.Tx) error) (err error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "PRAGMA foreign_keys = OFF"); err != nil {
		return err
	}
	defer func() {
		if _, ferr := conn.ExecContext(context.WithoutCancel(ctx), "PRAGMA foreign_keys = ON"); ferr != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // never reused
			if err == nil {
				err = ferr
			}
		}
	}()
	return runTx(ctx, conn, fn)
}

func (s *Store) checkNotNewer(v int) error {
	if v <= schemaLatest {
		return nil
	}
	return &dbError{
		is: ErrNewerSchema,
		msg: fmt.Sprintf("state database %s was written by a newer kubectl-gobrave (schema %d, this binary knows %d): upgrade the plugin or use --state-db",
			s.path, v, schemaLatest),
	}
}

// SchemaLatest is the schema version this binary writes.
func SchemaLatest() int { return schemaLatest }
