// Package memprobe holds what hack/monmem and hack/recmem share to measure
// the plugin's memory over N generated workloads: the state database seeded
// once per size (internal/genapi) and copied for each run, and the kernel's
// figures of a process (/proc/PID/status, /proc/loadavg). Linux only.
package memprobe

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gobrave/kubectl-gobrave/internal/genapi"
	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// Seeded returns the path of the state database of srv's records (srv.N
// over srv.Namespaces) in cacheDir, seeding it the first time.
func Seeded(ctx context.Context, srv *genapi.Server, cacheDir string) (string, error) {
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", err
	}
	seed := filepath.Join(cacheDir, fmt.Sprintf("seed-%d-%d.db", srv.N, srv.Namespaces))
	if _, err := os.Stat(seed); err == nil {
		return seed, nil
	}
	start := time.Now()
	st, err := store.Open(ctx, seed+".tmp")
	if err != nil {
		return "", err
	}
	if err := srv.Seed(ctx, st); err != nil {
		st.Close()
		return "", err
	}
	if err := st.Close(); err != nil {
		return "", err
	}
	if err := os.Rename(seed+".tmp", seed); err != nil {
		return "", err
	}
	fmt.Fprintf(os.Stderr, "seeded %d records in %s\n", srv.N, time.Since(start).Round(time.Second))
	return seed, nil
}

// CopyFile copies a seeded database (a plain file: Close checkpointed it).
func CopyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// Status reads the kB fields of /proc/PID/status (VmHWM, RssAnon, ...) in
// KiB; nil when the process is gone.
func Status(pid int) map[string]int64 {
	return StatusFile(fmt.Sprintf("/proc/%d/status", pid))
}

// StatusFile is Status of a status file already named.
func StatusFile(path string) map[string]int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	m := map[string]int64{}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok || !strings.HasSuffix(v, " kB") {
			continue
		}
		var kib int64
		if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d", &kib); err == nil {
			m[k] = kib
		}
	}
	return m
}

// Loadavg is the 1-minute load average, or "?".
func Loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}
