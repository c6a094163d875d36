package cmd

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericclioptions"
)

// requestTimeout bounds the monitors' informer sync, so it must read --request-timeout as kubectl
// does: a bare number is seconds, 0 or nothing means no timeout.
func TestRequestTimeout(t *testing.T) {
	for _, tt := range []struct {
		flag string
		want time.Duration
	}{
		{"", 0},
		{"0", 0},
		{"5", 5 * time.Second},
		{"3s", 3 * time.Second},
		{"1m30s", 90 * time.Second},
		{"250ms", 250 * time.Millisecond},
		{"-1s", 0},
		{"soon", 0},
	} {
		flags := genericclioptions.NewConfigFlags(true)
		*flags.Timeout = tt.flag
		f := &Factory{ConfigFlags: flags}
		if got := f.requestTimeout(); got != tt.want {
			t.Errorf("--request-timeout=%q: %s, want %s", tt.flag, got, tt.want)
		}
	}
	if got := (&Factory{}).requestTimeout(); got != 0 {
		t.Errorf("no flags: %s, want 0", got)
	}
}

// resetGC puts the collector and gcState back as a process starts, after
// the test.
func resetGC(t *testing.T) {
	t.Helper()
	if gcFromEnv() {
		t.Skip("GOGC or GOMEMLIMIT is set in the environment: it wins")
	}
	restore := func() {
		gcState.Lock()
		gcState.mode = gcDefault
		gcState.Unlock()
		debug.SetGCPercent(100)
		debug.SetMemoryLimit(math.MaxInt64)
	}
	restore()
	t.Cleanup(restore)
}

func gcSettings() (percent int, limit int64) {
	percent = debug.SetGCPercent(-1)
	debug.SetGCPercent(percent)
	return percent, debug.SetMemoryLimit(-1) // a negative limit reads it
}

// TestMonitorGC: a process that monitors collects garbage at GOGC=50 unless GOGC is set.
func TestMonitorGC(t *testing.T) {
	resetGC(t)
	tuneGCForMonitoring()
	if p, l := gcSettings(); p != monitorGCPercent || l != math.MaxInt64 {
		t.Errorf("after tuneGCForMonitoring: GOGC %d, limit %d; want %d, none", p, l, monitorGCPercent)
	}
	tuneGCForPass() // a monitoring process keeps its setting
	if p, l := gcSettings(); p != monitorGCPercent || l != math.MaxInt64 {
		t.Errorf("a pass after monitoring: GOGC %d, limit %d; want %d, none", p, l, monitorGCPercent)
	}
}

// TestPassGC: a one-shot pass collects at GOGC 400 under a 20 MiB limit,
// and goes back to the monitors' setting when its live heap outgrows half
// the limit, or when the process starts to monitor.
func TestPassGC(t *testing.T) {
	resetGC(t)
	tuneGCForPass()
	if p, l := gcSettings(); p != passGCPercent || l != passMemoryLimit {
		t.Fatalf("after tuneGCForPass: GOGC %d, limit %d; want %d, %d", p, l, passGCPercent, passMemoryLimit)
	}
	if !passHeapCheck(passLiveCeiling) {
		t.Fatal("a live heap at the ceiling ended the pass's setting")
	}
	if passHeapCheck(passLiveCeiling + 1) {
		t.Fatal("a live heap above the ceiling kept the pass's setting")
	}
	if p, l := gcSettings(); p != monitorGCPercent || l != math.MaxInt64 {
		t.Errorf("after the live heap outgrew the pass: GOGC %d, limit %d; want %d, none", p, l, monitorGCPercent)
	}

	resetGC(t)
	tuneGCForPass()
	tuneGCForMonitoring()
	if p, l := gcSettings(); p != monitorGCPercent || l != math.MaxInt64 {
		t.Errorf("monitoring after a pass: GOGC %d, limit %d; want %d, none", p, l, monitorGCPercent)
	}
}

// TestPassGCWatch: the check runs after real collections, and a live heap
// above the ceiling ends the pass's setting without anyone calling it.
func TestPassGCWatch(t *testing.T) {
	resetGC(t)
	tuneGCForPass()
	ballast := make([]*[1 << 20]byte, 0, passLiveCeiling>>20+2) // live, above the ceiling
	for range cap(ballast) {
		ballast = append(ballast, new([1 << 20]byte))
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		runtime.GC()
		gcState.Lock()
		mode := gcState.mode
		gcState.Unlock()
		if mode == gcMonitor {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pass's setting stood over a live heap of %d MiB", len(ballast))
		}
		time.Sleep(10 * time.Millisecond)
	}
	runtime.KeepAlive(ballast)
	if p, l := gcSettings(); p != monitorGCPercent || l != math.MaxInt64 {
		t.Errorf("GOGC %d, limit %d; want %d, none", p, l, monitorGCPercent)
	}
}
