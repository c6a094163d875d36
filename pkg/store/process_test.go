package store

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The tests here run real processes: the test binary again, told by
// GOBRAVE_STORE_CHILD what to be. SQLite's locks between processes are file
// locks, which goroutines of one process do not exercise the same way.
const childEnv = "GOBRAVE_STORE_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		if err := child(mode, os.Args[len(os.Args)-1]); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// child is one process of a test. Modes:
//
//	writer:I   waits for a line on stdin, opens the store, runs writeLoad as
//	           writer I and prints its Retries as JSON
//	hold       opens the store, takes its write lock (BEGIN IMMEDIATE),
//	           prints "locked" and holds it until stdin closes
//	hold-new   takes an exclusive lock of a new, empty file (before any
//	           schema or WAL), prints "locked" and holds it until stdin closes
func child(mode, path string) error {
	ctx := context.Background()
	in := bufio.NewReader(os.Stdin)
	switch {
	case strings.HasPrefix(mode, "writer:"):
		i, err := strconv.Atoi(strings.TrimPrefix(mode, "writer:"))
		if err != nil {
			return err
		}
		if _, err := in.ReadString('\n'); err != nil {
			return fmt.Errorf("wait for the start: %w", err)
		}
		s, err := Open(ctx, path)
		if err != nil {
			return err
		}
		defer s.Close()
		if err := writeLoad(ctx, s, i, processWrites); err != nil {
			return err
		}
		return json.NewEncoder(os.Stdout).Encode(s.Retries())
	case mode == "hold" || mode == "hold-new":
		var db *sql.DB
		if mode == "hold" {
			s, err := Open(ctx, path)
			if err != nil {
				return err
			}
			defer s.Close()
			db = s.db
		} else {
			var err error
			if db, err = sql.Open("sqlite", "file:"+path+"?_txlock=exclusive"); err != nil {
				return err
			}
			defer db.Close()
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		fmt.Println("locked")
		io.Copy(io.Discard, in) // until the test closes stdin
		return tx.Rollback()
	}
	return fmt.Errorf("unknown mode %q", mode)
}

const processWrites = 200

// startChild starts the test binary as a child in mode on path.
func startChild(t *testing.T, mode, path string) (*exec.Cmd, io.WriteCloser, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$", path)
	cmd.Env = append(os.Environ(), childEnv+"="+mode)
	cmd.Stderr = &prefixWriter{t: t, prefix: mode}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd, stdin, bufio.NewReader(stdout)
}

type prefixWriter struct {
	t      *testing.T
	prefix string
}

func (w *prefixWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s: %s", w.prefix, strings.TrimSpace(string(p)))
	return len(p), nil
}

// TestConcurrentProcesses has 8 processes open one new file at once and
// write to it, then checks that nothing was lost, and reports how often each
// retried after SQLITE_BUSY.
func TestConcurrentProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	const writers = 8
	type proc struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		out   *bufio.Reader
	}
	var procs []proc
	for i := range writers {
		cmd, stdin, out := startChild(t, fmt.Sprintf("writer:%d", i), path)
		procs = append(procs, proc{cmd, stdin, out})
	}
	// All started: let them go at once.
	for _, p := range procs {
		if _, err := io.WriteString(p.stdin, "go\n"); err != nil {
			t.Fatal(err)
		}
	}
	var total Retries
	for i, p := range procs {
		var r Retries
		err := json.NewDecoder(p.out).Decode(&r)
		if werr := p.cmd.Wait(); werr != nil || err != nil {
			t.Fatalf("writer %d: %v (output: %v)", i, werr, err)
		}
		total.Migrate += r.Migrate
		total.Write += r.Write
	}
	t.Logf("%d processes: %d migration retries, %d write retries after SQLITE_BUSY", writers, total.Migrate, total.Write)
	checkLoad(t, path, writers, processWrites)
}

// holdLock starts a process that holds the write lock of path until release
// is called.
func holdLock(t *testing.T, mode, path string) (release func()) {
	t.Helper()
	_, stdin, out := startChild(t, mode, path)
	line, err := out.ReadString('\n')
	if err != nil || line != "locked\n" {
		t.Fatalf("holder: %q, %v", line, err)
	}
	return func() { stdin.Close() }
}

// waitFor polls cond until it holds, failing the test after a minute: the
// evidence, not a sleep, is what the tests below wait for.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within a minute", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestWriteRetriesAcrossProcesses: a write that finds another process
// holding the write lock past the busy timeout is tried again, and lands once
// the lock is free; without the retries it fails with SQLITE_BUSY.
func TestWriteRetriesAcrossProcesses(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	short := waits{busy: 20 * time.Millisecond, retries: 1000, migrate: time.Minute}
	s, err := open(ctx, path, short)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	release := holdLock(t, "hold", path)
	done := make(chan error, 1)
	go func() { done <- s.Put(ctx, workload("default", "job", "late"), Transition{Type: Created}) }()
	waitFor(t, "write retry", func() bool {
		select {
		case err := <-done:
			t.Fatalf("the write ended while another process held the lock: %v", err)
		default:
		}
		return s.Retries().Write >= 1
	})
	release()
	if err := <-done; err != nil {
		t.Fatalf("write after the lock was freed: %v", err)
	}
	if _, err := s.Get(ctx, "k8s-default|job|late"); err != nil {
		t.Fatal(err)
	}

	// The same without retries: the retry loop is what made it land.
	none := short
	none.retries = 0
	s2, err := open(ctx, path, none)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	release = holdLock(t, "hold", path)
	defer release()
	err = s2.Put(ctx, workload("default", "job", "never"), Transition{Type: Created})
	if !isBusy(errors.Unwrap(err)) && !isBusy(err) {
		t.Fatalf("write under another process's lock without retries: %v, want SQLITE_BUSY", err)
	}
	if got := s2.Retries().Write; got != 0 {
		t.Errorf("%d write retries with retries off", got)
	}
}

// TestMigrateRetriesAcrossProcesses: Open of a new file that another process
// holds locked (as one that is switching it to WAL does) tries the migration
// again until the lock is free; without that it fails.
func TestMigrateRetriesAcrossProcesses(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	release := holdLock(t, "hold-new", path)

	retried := make(chan struct{})
	var once sync.Once
	w := waits{busy: 20 * time.Millisecond, retries: 1000, migrate: time.Minute,
		onRetry: func() { once.Do(func() { close(retried) }) }}
	opened := make(chan error, 1)
	var s *Store
	go func() {
		var err error
		s, err = open(ctx, path, w)
		opened <- err
	}()
	select {
	case err := <-opened:
		t.Fatalf("Open returned while another process held the new file locked: %v", err)
	case <-retried:
	}
	release()
	if err := <-opened; err != nil {
		t.Fatalf("Open after the lock was freed: %v", err)
	}
	defer s.Close()
	if got := s.Retries().Migrate; got < 1 {
		t.Errorf("%d migration retries, want at least 1", got)
	}
	if v, err := s.SchemaVersion(ctx); err != nil || v != schemaLatest {
		t.Errorf("schema %d, %v; want %d", v, err, schemaLatest)
	}

	// Without the wait, Open fails while the lock is held.
	path2 := filepath.Join(t.TempDir(), "state.db")
	release2 := holdLock(t, "hold-new", path2)
	defer release2()
	w.migrate, w.onRetry = 0, nil
	if s2, err := open(ctx, path2, w); err == nil {
		s2.Close()
		t.Fatal("Open of a locked new file without migration retries succeeded")
	}
}
