package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// series is one line of a chart: a value for each N that measured it.
type series struct {
	name string
	val  func(*scaleResult) (float64, bool)
}

func rowVal(key string, f func(*row) float64) func(*scaleResult) (float64, bool) {
	return func(s *scaleResult) (float64, bool) {
		r := s.find(key)
		if r == nil {
			return 0, false
		}
		return f(r), true
	}
}

func wallS(r *row) float64  { return r.wall.Seconds() }
func rssMiB(r *row) float64 { return float64(r.rss) / 1024 }

// writeCharts draws wall time and peak RSS against N (log-log) for gobrave's recover --once, the
// limit program and kubectl get, RSS also for monitor --all --follow, as PNG and SVG files in dir.
func writeCharts(dir string, ss []*scaleResult) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	charts := []struct {
		file, title, y string
		lines          []series
	}{
		{"bench-wall", "Wall time against N", "wall time (s)", []series{
			{"gobrave recover --once", rowVal("recover", wallS)},
			{"gobrave recover --once, nothing changed", rowVal("recover-synced", wallS)},
			{"limit: bare watch-list", rowVal("limit", wallS)},
			{"kubectl get -o name", rowVal("get", wallS)},
			{"gobrave ps > /dev/null", rowVal("ps", wallS)},
		}},
		{"bench-rss", "Peak RSS against N", "peak RSS (MiB)", []series{
			{"gobrave recover --once", rowVal("recover", rssMiB)},
			{"limit: bare watch-list", rowVal("limit", rssMiB)},
			{"kubectl get -o name", rowVal("get", rssMiB)},
			{"gobrave monitor --all --follow", func(s *scaleResult) (float64, bool) {
				if s.latency == nil || s.latency.monitor.MaxRSS == 0 {
					return 0, false
				}
				return float64(s.latency.monitor.MaxRSS) / 1024, true
			}},
		}},
	}
	for _, c := range charts {
		p := plot.New()
		p.Title.Text = c.title
		p.X.Label.Text = "N (gobrave workloads)"
		p.Y.Label.Text = c.y
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Legend.Top = true
		p.Legend.Left = true
		p.Add(plotter.NewGrid())
		var args []any
		for _, l := range c.lines {
			var xys plotter.XYs
			for _, s := range ss {
				if v, ok := l.val(s); ok && v > 0 {
					xys = append(xys, plotter.XY{X: float64(s.n), Y: v})
				}
			}
			if len(xys) > 0 {
				args = append(args, l.name, xys)
			}
		}
		if len(args) == 0 {
			continue
		}
		if err := plotutil.AddLinePoints(p, args...); err != nil {
			return files, err
		}
		for _, ext := range []string{".png", ".svg"} {
			f := filepath.Join(dir, c.file+ext)
			if err := p.Save(16*vg.Centimeter, 11*vg.Centimeter, f); err != nil {
				return files, fmt.Errorf("%s: %w", f, err)
			}
			if ext == ".png" {
				files = append(files, f)
			}
		}
	}
	return files, nil
}

// chartPoint is one N of `bench charts -in FILE`: wall seconds and peak RSS (MiB) by row key
// (recover, limit, get, ps), and the monitor's peak RSS.
type chartPoint struct {
	N          int                   `json:"n"`
	Rows       map[string][2]float64 `json:"rows"` // key → [wall s, RSS MiB]
	MonitorMiB float64               `json:"monitorMiB,omitempty"`
}

// chartsMain draws the charts from figures in a JSON file (a list of chartPoint): for runs whose
// points were measured in more than one invocation, or by hand.
//
//	go run ./hack/bench charts -in points.json -out docs/
func chartsMain(args []string) int {
	fs := flag.NewFlagSet("charts", flag.ContinueOnError)
	in := fs.String("in", "", "JSON list of {n, rows: {recover: [wall s, RSS MiB], ...}, monitorMiB}")
	out := fs.String("out", ".", "folder for bench-wall and bench-rss (.png, .svg)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	b, err := os.ReadFile(*in)
	if err != nil {
		fmt.Fprintf(os.Stderr, "charts: %v\n", err)
		return 1
	}
	var pts []chartPoint
	if err := json.Unmarshal(b, &pts); err != nil {
		fmt.Fprintf(os.Stderr, "charts: %s: %v\n", *in, err)
		return 1
	}
	var ss []*scaleResult
	for _, p := range pts {
		s := &scaleResult{n: p.N}
		for k, v := range p.Rows {
			s.rows = append(s.rows, row{key: k, wall: time.Duration(v[0] * float64(time.Second)), rss: int64(v[1] * 1024)})
		}
		if p.MonitorMiB > 0 {
			s.latency = &latencyResult{monitor: measured{MaxRSS: int64(p.MonitorMiB * 1024)}}
		}
		ss = append(ss, s)
	}
	files, err := writeCharts(*out, ss)
	if err != nil {
		fmt.Fprintf(os.Stderr, "charts: %v\n", err)
		return 1
	}
	fmt.Println(strings.Join(files, "\n"))
	return 0
}
