package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// storeResult is one line of `go test -bench` in pkg/store: its metrics by unit.
type storeResult struct {
	name    string
	metrics map[string]float64
	load    float64
}

// storeBenchmarks runs the store's benchmarks behind the writer and ps goals.
func storeBenchmarks(ctx context.Context, root string) ([]storeResult, error) {
	load := loadavg()
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", "^(BenchmarkApplyBatch|BenchmarkApplyBatchNoSpecs|BenchmarkPs10k|BenchmarkList10k)$",
		"-count", "1", "./pkg/store/")
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go test -bench ./pkg/store/: %w\n%s", err, out)
	}
	var rs []storeResult
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		r := storeResult{name: strings.SplitN(f[0], "-", 2)[0], metrics: map[string]float64{}, load: load}
		for i := 2; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				r.metrics[f[i+1]] = v
			}
		}
		rs = append(rs, r)
	}
	return rs, nil
}
