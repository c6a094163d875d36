//go:build gobraveprof

package cmd

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestHeapProfileEnv: with GOBRAVE_HEAP_PROFILE set, a monitoring command
// writes the heap profile of its peak and one at its exit; unset, nothing.
func TestHeapProfileEnv(t *testing.T) {
	path := filepath.Join(t.TempDir(), "heap.pprof")
	t.Setenv(heapProfileEnv, path)
	stop := startHeapProfile()
	keep := make([][]byte, 0, 64)
	for range 64 {
		keep = append(keep, make([]byte, 64<<10))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if fi, err := os.Stat(path); err == nil && fi.Size() > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no heap profile written at the peak")
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	_ = keep
	if fi, err := os.Stat(path + ".exit"); err != nil || fi.Size() == 0 {
		t.Errorf("no exit profile: %v", err)
	}

	t.Setenv(heapProfileEnv, "")
	startHeapProfile()()
}

// TestHeapProfileEvery: GOBRAVE_HEAP_PROFILE_EVERY adds numbered profiles,
// one each period, beside the peak's.
func TestHeapProfileEvery(t *testing.T) {
	path := filepath.Join(t.TempDir(), "heap.pprof")
	t.Setenv(heapProfileEnv, path)
	t.Setenv(heapProfileEveryEnv, "100ms")
	stop := startHeapProfile()
	defer stop()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if fi, err := os.Stat(path + ".001"); err == nil && fi.Size() > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no second periodic heap profile")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if fi, err := os.Stat(path + ".000"); err != nil || fi.Size() == 0 {
		t.Errorf("no first periodic profile: %v", err)
	}
}
