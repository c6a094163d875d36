package cmd_test

import (
	"context"
	"os"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/gobrave/kubectl-gobrave/pkg/cmd"
)

// storeCacheKiB runs the command args until it has opened the state
// database (the file exists: the factory holds its lock from before it
// creates the file until the store is kept), reads the page cache of the
// store it opened, and stops the command.
func storeCacheKiB(t *testing.T, args ...string) int {
	t.Helper()
	h := newHarness(t)
	f := h.factory()
	streams, _, _, _ := genericiooptions.NewTestIOStreams()
	root := cmd.NewCmdRoot(f, streams)
	root.SetArgs(args)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Error("the command did not return within 60s")
		}
		f.Close()
	}()
	eventually(t, "the state database is created", func() bool {
		_, err := os.Stat(h.statePath)
		return err == nil
	})
	st, err := f.Store(ctx) // the command's: the factory opens it once
	if err != nil {
		t.Fatal(err)
	}
	kib, err := st.CacheKiBOf(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return kib
}

// TestFollowingMonitorSmallPageCache: `monitor --all --follow` opens the
// state database with a page cache of 512 KiB a connection (SQLite's
// default, 2,000 KiB, was about 11 MiB of its peak RSS at 100,000
// workloads), and a command that is not a following monitor keeps the
// default (ApplyBatch is 10-20 % slower with the small cache).
func TestFollowingMonitorSmallPageCache(t *testing.T) {
	if got := storeCacheKiB(t, "monitor", "--all", "--follow"); got != 512 {
		t.Errorf("monitor --all --follow: page cache %d KiB a connection, want 512", got)
	}
	if got := storeCacheKiB(t, "ps", "--watch"); got != 2000 {
		t.Errorf("ps --watch: page cache %d KiB a connection, want SQLite's default 2000", got)
	}
}

// TestRecoverOncePageCache: `recover --once` opens the state database with
// a page cache of 1,000 KiB a connection (recoverCacheKiB): the default
// 2,000 KiB filled with pages that grow with the database, ~2.5 MiB of its
// peak RSS at 20,000 workloads and more.
func TestRecoverOncePageCache(t *testing.T) {
	if got := storeCacheKiB(t, "recover", "--once"); got != 1000 {
		t.Errorf("recover --once: page cache %d KiB a connection, want 1000", got)
	}
}
