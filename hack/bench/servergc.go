package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
)

// The API server's garbage collector decides much of a run's wall time at 100,000: one watch-list
// of 100,000 objects allocates about 700 MB in it, against a live heap of about 1.8 GB, so every
// other run crossed its GC target and paid for a collection (2.6–2.8 s against 4.2–4.5 s for the
// same plugin CPU; the limit program alternated alike; docs/performance.md). A run then also pays
// for the garbage of the run before it, and a median of 3 compares whatever mix each command got.
//
// With -server-gc, each measured run of recover, the limit and kubectl get starts on a freshly
// collected API server: collectServerGarbage asks it for a heap profile with gc=1, which runs
// runtime.GC() in it before answering (net/http/pprof). Each run counts the collections it caused
// itself (serverGCs), which the report shows beside the runs.

// gcMetric is the API server's count of completed collections (Go's collector, client_golang's
// Go collector: forced ones included).
const gcMetric = "go_gc_duration_seconds_count"

// collectServerGarbage makes the API server run a full garbage collection and waits for it.
func (c *cluster) collectServerGarbage(ctx context.Context) error {
	_, err := c.client.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/heap").Param("gc", "1").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("collect the API server's garbage (GET /debug/pprof/heap?gc=1; the bench's user needs the API server's profiling on): %w", err)
	}
	return nil
}

// serverGCs reads the API server's count of completed garbage collections from its /metrics.
func (c *cluster) serverGCs(ctx context.Context) (int64, error) {
	b, err := c.client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("read the API server's /metrics: %w", err)
	}
	return gcCount(b)
}

// gcCount finds gcMetric in a Prometheus text exposition.
func gcCount(metrics []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(metrics))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || name != gcMetric {
			continue
		}
		// The value is a float in the exposition (e.g. 26 or 2.6e+01).
		f, err := strconv.ParseFloat(strings.Fields(value)[0], 64)
		if err != nil {
			return 0, fmt.Errorf("%s %q: %w", gcMetric, value, err)
		}
		return int64(f), nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no %s in the API server's /metrics", gcMetric)
}

// gcsOf lists the API server's collections during each run with the run's wall time,
// "0 (4.46 s), 1 (5.22 s)", for the report; "" when the runs did not count them.
func gcsOf(ms []measured) string {
	var parts []string
	for _, m := range ms {
		if m.ServerGCs < 0 {
			return ""
		}
		parts = append(parts, fmt.Sprintf("%d (%s)", m.ServerGCs, secs(m.Wall)))
	}
	return strings.Join(parts, ", ")
}
