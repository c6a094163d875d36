// Command sqldrivers compares SQLite drivers for Go on the statements the
// store's writer runs for each batch of observed transitions: read the
// batch's records (runtime_id IN json_each), insert one event per record
// (a multi-row INSERT), update the records (a multi-row UPDATE ... FROM
// (VALUES ...)), commit; WAL, synchronous=NORMAL, batches of 256 in the
// order of a watch-list stream, as recover --once writes them.
//
// It answers one question of issue 16: would another SQLite make the
// writer fast enough? The plugin uses modernc.org/sqlite (C translated to
// Go, so CGO_ENABLED=0 builds for every krew platform). The other driver
// is chosen at build time, as both register the name "sqlite3":
//
//	go run .                        # github.com/ncruces/go-sqlite3 (SQLite as Wasm translated to Go; no cgo)
//	CGO_ENABLED=1 go run -tags mattn .  # github.com/mattn/go-sqlite3 (cgo, the C library)
//
// This is a module of its own (hack/sqldrivers/go.mod): the plugin's
// go.mod, and so its build and krew archives, do not depend on either.
// Each repetition runs both drivers on a fresh database, one after the
// other; compare the ratio within one run (shared machines are noisy).
// Results and method: docs/performance.md, "What the twentieth round
// measured".
package main

import (
	"database/sql"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	_ "modernc.org/sqlite" // "sqlite"
)

// The store's schema 9 tables as far as the writer touches them: the
// records (WITHOUT ROWID, with its three indexes) and the events (a rowid
// table appended at its tail).
const schema = `
CREATE TABLE workloads (
	runtime_id TEXT NOT NULL PRIMARY KEY, runtime TEXT NOT NULL, namespace TEXT NOT NULL, kind TEXT NOT NULL,
	name TEXT NOT NULL, uid TEXT NOT NULL DEFAULT '', state TEXT NOT NULL, message TEXT NOT NULL DEFAULT '',
	epoch INTEGER NOT NULL DEFAULT 1, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,
	request TEXT NOT NULL DEFAULT '', expect TEXT NOT NULL DEFAULT '', reason TEXT NOT NULL DEFAULT '',
	exit_code INTEGER, started_at INTEGER, finished_at INTEGER, last_seq INTEGER NOT NULL DEFAULT 0,
	spec TEXT NOT NULL DEFAULT '{}') WITHOUT ROWID;
CREATE INDEX workloads_state ON workloads (state);
CREATE INDEX workloads_namespace ON workloads (namespace, kind, name, runtime_id);
CREATE INDEX workloads_name ON workloads (name);
CREATE TABLE events (seq INTEGER PRIMARY KEY AUTOINCREMENT, runtime_id TEXT NOT NULL, type TEXT NOT NULL,
	message TEXT NOT NULL DEFAULT '', uid TEXT NOT NULL DEFAULT '', epoch INTEGER NOT NULL, observed INTEGER NOT NULL,
	time INTEGER NOT NULL, reason TEXT NOT NULL DEFAULT '', exit_code INTEGER, started_at INTEGER, finished_at INTEGER,
	prev INTEGER NOT NULL DEFAULT 0);
`

const spec = `{"name":"task","image":"registry.example/team/worker:1.2.3","command":["sh","-c","run"],"env":{"A":"1","B":"2"},"labels":{"team":"a"}}`

func main() {
	n := flag.Int("n", 10000, "records, each changed once")
	batch := flag.Int("batch", 256, "records a transaction")
	reps := flag.Int("reps", 5, "repetitions (each runs both drivers)")
	flag.Parse()
	if err := run(*n, *batch, *reps); err != nil {
		fmt.Fprintln(os.Stderr, "sqldrivers:", err)
		os.Exit(1)
	}
}

func run(n, batch, reps int) error {
	dir, err := os.MkdirTemp("", "sqldrivers")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	drivers := []struct{ name, label, dsnPrefix string }{
		{"sqlite", "modernc.org/sqlite", ""},
		{"sqlite3", otherDriver, otherDSNPrefix},
	}
	cpu := map[string][]float64{}
	for r := range reps {
		// Alternate which runs first.
		order := slices.Clone(drivers)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, d := range order {
			path := filepath.Join(dir, fmt.Sprintf("%s-%d.db", d.name, r))
			c, w, err := changeAll(d.name, d.dsnPrefix+path, n, batch)
			if err != nil {
				return fmt.Errorf("%s: %w", d.label, err)
			}
			us := float64(c.Nanoseconds()) / 1e3 / float64(n)
			cpu[d.label] = append(cpu[d.label], us)
			fmt.Printf("rep %d %-28s %6.2f µs CPU, %6.2f µs wall a transition\n", r, d.label, us, float64(w.Nanoseconds())/1e3/float64(n))
		}
	}
	a, b := median(cpu[drivers[0].label]), median(cpu[drivers[1].label])
	fmt.Printf("median CPU a transition: %s %.2f µs, %s %.2f µs (%.2f ×)\n", drivers[0].label, a, drivers[1].label, b, b/a)
	return nil
}

// changeAll makes n records in a new database at dsn, then changes each
// once, batch records a transaction, and returns the CPU and wall time of
// the changes.
func changeAll(driver, dsn string, n, batch int) (cpu, wall time.Duration, err error) {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return 0, 0, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // the store's writer: one connection
	for _, q := range []string{"PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL", "PRAGMA busy_timeout=5000", schema} {
		if _, err := db.Exec(q); err != nil {
			return 0, 0, err
		}
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("k8s-ns%02d|job|task-%06d", i%100, i)
	}
	if err := populate(db, ids); err != nil {
		return 0, 0, err
	}
	slices.Sort(ids) // the order of a watch-list stream
	c0, w0 := cpuTime(), time.Now()
	for lo := 0; lo < n; lo += batch {
		if err := change(db, ids[lo:min(lo+batch, n)], lo); err != nil {
			return 0, 0, err
		}
	}
	return cpuTime() - c0, time.Since(w0), nil
}

func populate(db *sql.DB, ids []string) error {
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	st, err := tx.Prepare("INSERT INTO workloads (runtime_id, runtime, namespace, kind, name, uid, state, created_at, updated_at, spec) VALUES (?,?,?,?,?,?,?,1,1,?)")
	if err != nil {
		return err
	}
	for i, id := range ids {
		if _, err := st.Exec(id, "k8s", fmt.Sprintf("ns%02d", i%100), "job", fmt.Sprintf("task-%06d", i),
			fmt.Sprintf("%08d-aaaa-bbbb-cccc-dddddddddddd", i), "created", spec); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	_, err = db.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
	return err
}

// change is one transaction of the writer: read the records, append an
// event to each, update each.
func change(db *sql.DB, ids []string, seq int) error {
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	rows, err := tx.Query("SELECT runtime_id, state, uid, epoch, request, expect, reason, exit_code, started_at, finished_at, last_seq FROM workloads WHERE runtime_id IN (SELECT value FROM json_each(?))",
		`["`+strings.Join(ids, `","`)+`"]`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var id, state, uid, request, expect, reason string
		var epoch, last int64
		var exit, started, finished sql.NullInt64
		if err := rows.Scan(&id, &state, &uid, &epoch, &request, &expect, &reason, &exit, &started, &finished, &last); err != nil {
			rows.Close()
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	ins, insArgs := values("INSERT INTO events (runtime_id, type, uid, epoch, observed, time, prev) VALUES ", "(?,?,?,?,1,?,?)", len(ids))
	upd, updArgs := values("UPDATE workloads SET state = v.column2, reason = v.column3, started_at = v.column4, updated_at = v.column5, last_seq = v.column6 FROM (VALUES ", "(?,?,?,?,?,?)", len(ids))
	for i, id := range ids {
		insArgs = append(insArgs, id, "ContainerStarted", "uid", 1, 12345, 0)
		updArgs = append(updArgs, id, "running", "Started", 12345, 12345, seq+i+1)
	}
	if _, err := tx.Exec(ins, insArgs...); err != nil {
		return err
	}
	if _, err := tx.Exec(upd+") AS v WHERE workloads.runtime_id = v.column1", updArgs...); err != nil {
		return err
	}
	return tx.Commit()
}

// values is head followed by n copies of row, comma-separated, and an
// empty argument slice with room for them.
func values(head, row string, n int) (string, []any) {
	return head + strings.TrimSuffix(strings.Repeat(row+",", n), ","), make([]any, 0, n*strings.Count(row, "?"))
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}
