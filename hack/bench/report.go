package main

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

type report struct {
	started time.Time
	total   time.Duration
	env     map[string]string
	store   []storeResult
	scales  []*scaleResult
	charts  []string
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
				w("| ApplyBatch (single writer, batches of 250) | %.0f transitions/s (%.0f per CPU-second) | ≥ 30,000/s: %s |\n",
					v, s.metrics["transitions/cpu-s"], yes(v >= 30000))
			case "BenchmarkApplyBatchNoSpecs":
				v := s.metrics["transitions/s"]
				w("| ApplyBatchNoSpecs (the same, as the monitors and recover record: specs not decoded) | %.0f transitions/s (%.0f per CPU-second) | ≥ 30,000/s: %s |\n",
					v, s.metrics["transitions/cpu-s"], yes(v >= 30000))
			case "BenchmarkPs10k":
				v := s.metrics["ns/op"] / 1e6
				w("| Ps10k (`ps -a` query, 10,000 records) | %.0f ms/op (%.0f CPU-ms/op) | ≤ 150 ms: %s |\n", v, s.metrics["cpu-ms/op"], yes(v <= 150))
			case "BenchmarkList10k":
				w("| List10k (the same with specs decoded) | %.0f ms/op (%.0f CPU-ms/op) | – |\n", s.metrics["ns/op"]/1e6, s.metrics["cpu-ms/op"])
			}
		}
		w("\n")
	}

	if len(r.scales) > 0 {
		curves(w, r.scales)
	}
	for _, f := range r.charts {
		w("![%s](%s)\n\n", filepath.Base(f), f)
	}
	for _, s := range r.scales {
		s.markdown(w)
	}
	w("The whole run took %s.\n", r.total.Round(time.Second))
	return b.String()
}

// curves is one line per N: the figures the charts draw, and the goals of issue 16.
func curves(w func(string, ...any), ss []*scaleResult) {
	w("## Curves over N\n\n")
	w("| N | recover wall | limit wall | kubectl get wall | recover ÷ limit (≤ 1.5) | in sync ÷ limit | recover ÷ get (≤ 0.5) | recover RSS MiB | limit RSS | kubectl RSS | recover requests | ps > /dev/null | ps -a first row | monitor RSS MiB | event→row p99 | DB bytes/record |\n")
	w("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, s := range ss {
		cell := func(key string, f func(*row) string) string {
			if r := s.find(key); r != nil {
				return f(r)
			}
			return "–"
		}
		wall := func(r *row) string { return secs(r.wall) }
		rss := func(r *row) string { return mib(r.rss) }
		ratioOf := func(a, b string) string {
			x, y := s.find(a), s.find(b)
			if x == nil || y == nil {
				return "–"
			}
			return ratio(x.wall.Seconds(), y.wall.Seconds())
		}
		mon, p99 := "–", "–"
		if l := s.latency; l != nil {
			mon = mib(l.monitor.MaxRSS)
			if l.lineFromWatch.n > 0 {
				p99 = ms3(l.lineFromWatch.p99)
			}
		}
		per := "–"
		if s.dbBytes > 0 {
			per = fmt.Sprintf("%d", s.dbBytes/int64(s.n))
		}
		w("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", s.n,
			cell("recover", wall), cell("limit", wall), cell("get", wall), ratioOf("recover", "limit"), ratioOf("recover-synced", "limit"), ratioOf("recover", "get"),
			cell("recover", rss), cell("limit", rss), cell("get", rss),
			cell("recover", func(r *row) string { return fmt.Sprintf("%d (%d per object)", r.requests, r.perObj) }),
			cell("ps", wall), cell("psfirst", func(r *row) string { return ms3(r.wall) }), mon, p99, per)
	}
	w("\n")
}

func (s *scaleResult) markdown(w func(string, ...any)) {
	w("## N = %d\n\n", s.n)
	w("- the cluster held: %s\n", s.held)
	for _, l := range s.setup {
		w("- %s\n", l)
	}
	if s.dbBytes > 0 {
		w("- the state database after a recover: %d records, %d events (%.1f a record), %.1f MiB: **%d bytes a record**\n",
			s.n, s.events, float64(s.events)/float64(s.n), float64(s.dbBytes)/(1<<20), s.dbBytes/int64(s.n))
	}
	w("- this N took %s from the cluster's start to its removal\n", s.total.Round(time.Second))
	w("\n| command | API requests (per object) | wall | peak RSS MiB | CPU s | load | notes |\n")
	w("| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range s.rows {
		wall := secs(r.wall)
		if r.spread != "" {
			wall += " (" + r.spread + ")"
		}
		rss := mib(r.rss)
		if r.rssRange != "" {
			rss += " (" + r.rssRange + ")"
		}
		w("| %s | %d (%d) | %s | %s | %.2f | %.1f | %s |\n", r.what, r.requests, r.perObj, wall, rss, r.cpu.Seconds(), r.load, r.note)
	}
	w("\n")

	w("| goal (issue 16) | measured | |\n| --- | --- | --- |\n")
	rec, lim, get := s.find("recover"), s.find("limit"), s.find("get")
	if rec != nil {
		w("| `recover --once`: a constant number of requests, none per object | %d (%d per object) | %s |\n", rec.requests, rec.perObj, yes(rec.requests <= 10 && rec.perObj == 0))
		w("| `recover --once`: peak RSS ≤ 64 MiB | %s MiB | %s |\n", mib(rec.rss), yes(rec.rss <= 64*1024))
		if lim != nil {
			w("| `recover --once` wall ≤ 1.5 × the limit | %s ÷ %s = %s | %s |\n", secs(rec.wall), secs(lim.wall), ratio(rec.wall.Seconds(), lim.wall.Seconds()), yes(rec.wall.Seconds() <= 1.5*lim.wall.Seconds()))
		}
		if syn := s.find("recover-synced"); syn != nil && lim != nil {
			w("| `recover --once` wall ≤ 1.5 × the limit, nothing changed (the database a first recover left) | %s ÷ %s = %s | %s |\n", secs(syn.wall), secs(lim.wall), ratio(syn.wall.Seconds(), lim.wall.Seconds()), yes(syn.wall.Seconds() <= 1.5*lim.wall.Seconds()))
		}
		if get != nil {
			w("| `recover --once` wall ≤ 0.5 × `kubectl get -o name` | %s ÷ %s = %s | %s |\n", secs(rec.wall), secs(get.wall), ratio(rec.wall.Seconds(), get.wall.Seconds()), yes(rec.wall.Seconds() <= 0.5*get.wall.Seconds()))
		}
	}
	if r := s.find("ps"); r != nil {
		w("| `ps` (%d non-terminal rows) to /dev/null ≤ 1 s | %s | %s |\n", s.n, secs(r.wall), yes(r.wall <= time.Second))
	}
	if r := s.find("psfirst"); r != nil {
		w("| `ps -a` first row ≤ 100 ms | %s | %s |\n", ms3(r.wall), yes(r.wall <= 100*time.Millisecond))
	}
	if l := s.latency; l != nil {
		m := l.monitor
		maxReq := 10
		if l.baseline != nil {
			maxReq = 20 // the baseline monitor's requests are counted too (same User-Agent)
		}
		w("| `monitor --all --follow`: a constant number of requests, none per object | %d (%d per object) | %s |\n", len(m.Requests), perObjectCount(m.Requests), yes(len(m.Requests) <= maxReq && perObjectCount(m.Requests) == 0))
		w("| `monitor --all --follow`: peak RSS ≤ 128 MiB | %s MiB | %s |\n", mib(m.MaxRSS), yes(m.MaxRSS <= 128*1024))
		if l.lineFromWatch.n > 0 {
			w("| event → row p99 ≤ 100 ms (the bench's watch sees Complete → the monitor's line, printed after the commit) | %s | %s |\n", ms3(l.lineFromWatch.p99), yes(l.lineFromWatch.p99 <= 100*time.Millisecond))
		}
	}
	w("\n")

	if l := s.latency; l != nil {
		w("### `monitor --all --follow`: event to database, %d jobs released in %s (completions seen over %s)\n\n", l.jobs, secs(l.release), secs(l.completions))
		w("The monitor first recorded the %d changes of the N + %d records in %s (from its start to its line of the last one).\n\n", s.n+l.jobs, l.jobs, secs(l.initial))
		w("| from → to | n | min | p50 | p99 | max | below 0 |\n| --- | --- | --- | --- | --- | --- | --- |\n")
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
			w("| %s | %d | %s | %s | %s | %s | %d |\n", d.label, d.d.n, ms3(d.d.mind), ms3(d.d.p50), ms3(d.d.p99), ms3(d.d.maxd), d.d.neg)
		}
		w("\n")
		writeLatencyExtra(w, l)
		w("The two clocks are this machine's, but the benchmark's watch is a process competing for the same CPUs as the monitor: when the monitor's watch delivers first, a delay is below 0 (column \"below 0\"), and the watch-based figures are a lower bound by the watch's own lag. The `lastTransitionTime`-based rows bound it from above (whole seconds, 0–1 s late).\n\n")
		m := l.monitor
		w("- `monitor --all --follow` during the phase: %d requests (%d per object): %s; peak RSS %s MiB, CPU %.1f s; it printed the last exit %s after the benchmark's watch saw the last completion.\n",
			len(m.Requests), perObjectCount(m.Requests), summarize(m.Requests), mib(m.MaxRSS), m.CPU.Seconds(), ms3(l.monitorLast))
		if k := l.kwait; k != nil {
			w("- side by side, `kubectl wait --for=condition=complete job -l %s` (started when the release began): %d requests (%d per object), peak RSS %s MiB, returned %s after the last completion was seen (%s wall).\n",
				labelLatency, len(k.Requests), perObjectCount(k.Requests), mib(k.MaxRSS), secs(l.kwaitLast), secs(k.Wall))
		}
		w("\n")
	}
	for _, n := range s.notes {
		w("- %s\n", n)
	}
	w("\n")
}

func ms3(d time.Duration) string {
	return fmt.Sprintf("%d ms", d.Milliseconds())
}
