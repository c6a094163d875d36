package cmd

import (
	"os"
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

// TestMonitorGC: a process that monitors collects garbage at GOGC=50 unless GOGC is set.
func TestMonitorGC(t *testing.T) {
	if os.Getenv("GOGC") != "" {
		t.Skip("GOGC is set in the environment: it wins")
	}
	tuneGCForMonitoring()
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	if old != monitorGCPercent {
		t.Errorf("GOGC after tuneGCForMonitoring = %d, want %d", old, monitorGCPercent)
	}
}
