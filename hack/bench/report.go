package main

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

type report struct {
	started time.Time
	env     map[string]string
	store   []storeResult
	scales  []*scaleResult
	errors  []string
}

func mib(kib int64) string { return fmt.Sprintf("%.1f", float64(kib)/1024) }

func ratio(a, b float64) string {
	if b == 0 {
		return "–"
	}
	r := a / b
	switch {
	case r == 0:
		return "0"
	case r < 0.01:
		return fmt.Sprintf("%.4f", r)
	case r < 10:
		return fmt.Sprintf("%.2f", r)
	default:
		return fmt.Sprintf("%.0f", r)
	}
}

func yes(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

func (r *report) markdown() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# Scale benchmark, %s\n\n", r.started.Format("2006-01-02 15:04 MST"))
	keys := make([]string, 0, len(r.env))
	for k := range r.env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		w("- %s: %s\n", k, r.env[k])
	}
	w("\n")
	for _, e := range r.errors {
		w("**error:** %s\n\n", e)
	}

	if len(r.store) > 0 {
		w("## Store benchmarks (go test -bench ./pkg/store/, load %.1f at the start)\n\n", r.store[0].load)
		w("| benchmark | result | goal |\n| --- | --- | --- |\n")
		for _, s := range r.store {
			switch s.name {
			case "BenchmarkApplyBatch":
				v := s.metrics["transitions/s"]
				w("| ApplyBatch (single writer, batches of 250) | %.0f transitions/s (%.0f per CPU-second) | ≥ 5,000/s: %s |\n",
					v, s.metrics["transitions/cpu-s"], yes(v >= 5000))
			case "BenchmarkPs10k":
				v := s.metrics["ns/op"] / 1e6
				w("| Ps10k (`ps -a` query, 10,000 records) | %.0f ms/op (%.0f CPU-ms/op) | ≤ 150 ms: %s |\n", v, s.metrics["cpu-ms/op"], yes(v <= 150))
			case "BenchmarkList10k":
				w("| List10k (the same with specs decoded) | %.0f ms/op (%.0f CPU-ms/op) | – |\n", s.metrics["ns/op"]/1e6, s.metrics["cpu-ms/op"])
			}
		}
		w("\n")
	}

	for _, s := range r.scales {
		s.markdown(w)
	}
	return b.String()
}

func (s *scaleResult) markdown(w func(string, ...any)) {
	w("## N = %d\n\n", s.n)
	for _, l := range s.setup {
		w("- %s\n", l)
	}
	w("\n| phase | command | API requests (per object) | wall | peak RSS MiB | CPU s | load | notes |\n")
	w("| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range s.rows {
		wall := secs(r.wall)
		if r.spread != "" {
			wall += " (" + r.spread + ")"
		}
		req := fmt.Sprintf("%d (%d)", r.requests, r.perObj)
		if r.extrap {
			wall = "~" + secs(r.wall) + " *extrapolated*"
			req = "~" + req + " *extrapolated*"
		}
		rss := mib(r.rss)
		if r.rssRange != "" {
			rss += " (" + r.rssRange + ")"
		}
		w("| %s | %s | %s | %s | %s | %.2f | %.1f | %s |\n", r.phase, r.what, req, wall, rss, r.cpu.Seconds(), r.load, r.note)
	}
	w("\n")

	// Ratios: this project ÷ the peer.
	pairs := []struct{ mine, peer, label string }{
		{"recover/unrelated", "kubectl", "`recover --once` ÷ (`kubectl wait` jobs + `kubectl rollout status` deployments)"},
		{"monitor/unrelated", "kubectl", "`monitor --all` ÷ (`kubectl wait` + `kubectl rollout status`)"},
		{"recover/unrelated", "baseline", "`recover --once` ÷ per-ID baseline"},
		{"monitor/unrelated", "baseline", "`monitor --all` ÷ per-ID baseline"},
		{"ps", "get", "`ps` ÷ `kubectl get deploy,job -A -l gobrave-workload`"},
	}
	w("| ratio (this project ÷ peer) | requests | wall time | peak RSS |\n| --- | --- | --- | --- |\n")
	for _, p := range pairs {
		a, b := s.find(p.mine), s.find(p.peer)
		if a == nil || b == nil {
			continue
		}
		mark := ""
		if b.extrap {
			mark = " (peer extrapolated)"
		}
		w("| %s%s | %s (%d ÷ %d) | %s | %s |\n", p.label, mark, ratio(float64(a.requests), float64(b.requests)), a.requests, b.requests,
			ratio(a.wall.Seconds(), b.wall.Seconds()), ratio(float64(a.rss), float64(b.rss)))
	}
	w("\n")

	// Goals.
	wallGoal := 2 * time.Second
	if s.n > 1000 {
		wallGoal = 6 * time.Second
	}
	w("| goal | measured | |\n| --- | --- | --- |\n")
	for _, k := range []string{"recover/clean", "monitor/clean", "recover/unrelated", "monitor/unrelated"} {
		r := s.find(k)
		if r == nil {
			continue
		}
		w("| %s %s: ≤ 10 requests, none per object | %d (%d per object) | %s |\n", r.what, r.phase, r.requests, r.perObj, yes(r.requests <= 10 && r.perObj == 0))
		if s.n == 1000 || s.n == 5000 {
			w("| %s %s: wall ≤ %s | %s | %s |\n", r.what, r.phase, secs(wallGoal), secs(r.wall), yes(r.wall <= wallGoal))
		}
		if s.n == 5000 {
			w("| %s %s: peak RSS ≤ 80 MiB | %s MiB | %s |\n", r.what, r.phase, mib(r.rss), yes(r.rss <= 80*1024))
		}
	}
	for _, k := range []string{"recover", "monitor"} {
		a, b := s.find(k+"/clean"), s.find(k+"/unrelated")
		if a == nil || b == nil {
			continue
		}
		d := float64(b.rss-a.rss) / float64(a.rss) * 100
		w("| %s: unrelated objects move peak RSS by < 10 %% | %s → %s MiB (%+.1f %%) | %s |\n", a.what, mib(a.rss), mib(b.rss), d, yes(d < 10 && d > -10))
	}
	if l := s.latency; l != nil && l.rowFromCond.n > 0 {
		w("| event → database p99 ≤ 1 s (events row − Complete lastTransitionTime) | %s | %s |\n", secs(l.rowFromCond.p99), yes(l.rowFromCond.p99 <= time.Second))
		w("| event → database p99 ≤ 1 s (line printed after the commit − first seen by the benchmark's watch) | %s | %s |\n", secs(l.lineFromWatch.p99), yes(l.lineFromWatch.p99 <= time.Second))
	}
	w("\n")

	if l := s.latency; l != nil {
		w("### Event to database, %d jobs released in %s (completions seen over %s)\n\n", l.jobs, secs(l.release), secs(l.completions))
		w("| from → to | n | p50 | p99 | max |\n| --- | --- | --- | --- | --- |\n")
		for _, d := range []struct {
			label string
			d     dist
		}{
			{"Complete `lastTransitionTime` (whole seconds) → events row `time`", l.rowFromCond},
			{"benchmark's watch first sees Complete → events row `time`", l.rowFromWatch},
			{"Complete `lastTransitionTime` → monitor prints the event (after the commit)", l.lineFromCond},
			{"benchmark's watch first sees Complete → monitor prints the event (after the commit)", l.lineFromWatch},
			{"bias: `lastTransitionTime` → benchmark's watch", l.condToWatch},
		} {
			w("| %s | %d | %s | %s | %s |\n", d.label, d.d.n, ms3(d.d.p50), ms3(d.d.p99), ms3(d.d.maxd))
		}
		w("\n")
		m := l.monitor
		w("- `monitor --all` during the phase: %d requests (%d per object): %s; peak RSS %s MiB; it printed the last exit %s after the benchmark's watch saw the last completion.\n",
			len(m.Requests), perObjectCount(m.Requests), summarize(m.Requests), mib(m.MaxRSS), ms3(l.monitorLast))
		if k := l.kwait; k != nil {
			w("- side by side, `kubectl wait --for=condition=complete job -l %s` (started when the release began): %d requests (%d per object), peak RSS %s MiB, returned %s after the last completion was seen (%s wall).\n",
				labelLatency, len(k.Requests), perObjectCount(k.Requests), mib(k.MaxRSS), secs(l.kwaitLast), secs(k.Wall))
		}
		w("\n")
	}
	for _, n := range s.notes {
		w("- %s\n", n)
	}
}

func ms3(d time.Duration) string {
	return fmt.Sprintf("%d ms", d.Milliseconds())
}
