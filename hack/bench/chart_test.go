package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestWriteCharts draws both charts from three sizes and checks that each file is a PNG or an SVG
// with every series named in it.
func TestWriteCharts(t *testing.T) {
	var ss []*scaleResult
	for i, n := range []int{1000, 10000, 100000} {
		k := time.Duration(i + 1)
		ss = append(ss, &scaleResult{n: n, rows: []row{
			{key: "recover", wall: k * time.Second, rss: 50 << 10},
			{key: "limit", wall: k * 800 * time.Millisecond, rss: 40 << 10},
			{key: "get", wall: k * 3 * time.Second, rss: 90 << 10},
			{key: "ps", wall: k * 100 * time.Millisecond, rss: 30 << 10},
		}, latency: &latencyResult{monitor: measured{MaxRSS: 70 << 10}}})
	}
	dir := t.TempDir()
	files, err := writeCharts(dir, ss)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 {
		t.Fatalf("PNG files %v, want 2", files)
	}
	for _, name := range []string{"bench-wall", "bench-rss"} {
		png, err := os.ReadFile(filepath.Join(dir, name+".png"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(png, []byte("\x89PNG")) {
			t.Errorf("%s.png is not a PNG", name)
		}
		svg, err := os.ReadFile(filepath.Join(dir, name+".svg"))
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"gobrave recover --once", "limit: bare watch-list", "kubectl get -o name"}
		for _, w := range want {
			if !bytes.Contains(svg, []byte(w)) {
				t.Errorf("%s.svg lacks the series %q", name, w)
			}
		}
	}
}
