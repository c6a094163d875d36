package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/clientcmd"
)

// procSpec is one measured process.
type procSpec struct {
	argv []string
	env  []string
	// ua is the User-Agent prefix of its requests in the audit log.
	ua string
	// until, when set, is called with each stdout line and its arrival time; when it returns true
	// the milestone is reached: the wall time stops there and the process gets SIGINT.
	until   func(line string, at time.Time) bool
	timeout time.Duration
	// stdout, when set, receives every stdout line.
	stdout *strings.Builder
	// devNull sends stdout to /dev/null (no lines are counted).
	devNull bool
	// settle starts the run on a freshly collected API server and counts the collections during
	// it (with -server-gc; servergc.go). Not for a run measured beside another one.
	settle bool
}

// measured is what one process run gave.
type measured struct {
	Wall     time.Duration // start to exit, or to the milestone
	MaxRSS   int64         // KiB (ru_maxrss on Linux)
	CPU      time.Duration // user + system
	Requests []request
	Lines    int // stdout lines
	Code     int
	Stderr   string
	Load     float64 // 1-minute load average at the start
	Reached  bool    // the milestone was reached (with until)
	Started  time.Time
	// ServerGCs is the number of the API server's garbage collections from the run's start to its
	// end (see settle); -1 when not counted.
	ServerGCs int64
}

// auditBarrier makes one request under a User-Agent of its own and waits until the audit log
// (from byte offset from) has it: every request completed before it is then logged too.
func (c *cluster) auditBarrier(ctx context.Context, from int64) error {
	rc, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		return err
	}
	rc.UserAgent = fmt.Sprintf("gobrave-bench-barrier/%d", c.seq.Add(1))
	dc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return err
	}
	if _, err := dc.ServerVersion(); err != nil {
		return fmt.Errorf("audit barrier: %w", err)
	}
	return wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		rs, err := c.audit.requests(from, rc.UserAgent)
		return len(rs[rc.UserAgent]) > 0, err
	})
}

// run starts p, measures it and collects its requests from the audit log.
func (c *cluster) run(ctx context.Context, p procSpec) (measured, error) {
	m := measured{ServerGCs: -1}
	if p.timeout == 0 {
		p.timeout = 30 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	settle := p.settle && c.serverGC
	var gcs int64
	if settle {
		if err := c.collectServerGarbage(ctx); err != nil {
			return m, err
		}
		var err error
		if gcs, err = c.serverGCs(ctx); err != nil {
			return m, err
		}
	}
	from, err := c.audit.offset()
	if err != nil {
		return m, err
	}
	ruFile := filepath.Join(c.tmp, fmt.Sprintf("rusage-%d.json", c.seq.Add(1)))
	cmd := exec.Command(launcher, append([]string{"-rusage", ruFile, "--"}, p.argv...)...)
	cmd.Env = p.env
	newGroup(cmd)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	var stdout io.ReadCloser
	if p.devNull {
		null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			return m, err
		}
		defer null.Close()
		cmd.Stdout = null
		stdout = io.NopCloser(strings.NewReader(""))
	} else if stdout, err = cmd.StdoutPipe(); err != nil {
		return m, err
	}
	m.Load = loadavg()
	if err := cmd.Start(); err != nil {
		return m, err
	}
	exited := make(chan struct{})
	defer close(exited)
	go func() {
		select {
		case <-ctx.Done():
			killGroup(cmd.Process.Pid) // the launcher and the measured process
		case <-exited:
		}
	}()
	var milestone time.Time
	var wg sync.WaitGroup
	wg.Go(func() {
		r := bufio.NewReaderSize(stdout, 1<<20)
		for {
			line, err := r.ReadString('\n')
			if line != "" {
				at := time.Now()
				m.Lines++
				if p.stdout != nil {
					p.stdout.WriteString(line)
				}
				if p.until != nil && milestone.IsZero() && p.until(strings.TrimRight(line, "\n"), at) {
					milestone = at
					_ = cmd.Process.Signal(syscall.SIGINT) // the launcher passes it on
				}
			}
			if err != nil {
				if err != io.EOF {
					_, _ = io.Copy(io.Discard, stdout)
				}
				return
			}
		}
	})
	wg.Wait()
	werr := cmd.Wait()
	m.Stderr = stderr.String()
	if settle && ctx.Err() == nil {
		after, err := c.serverGCs(ctx)
		if err != nil {
			return m, err
		}
		m.ServerGCs = after - gcs
	}
	if ctx.Err() != nil && milestone.IsZero() {
		return m, fmt.Errorf("%s: %w (stderr: %s)", strings.Join(p.argv, " "), ctx.Err(), tail(m.Stderr))
	}
	var l launched
	b, err := os.ReadFile(ruFile)
	if err == nil {
		err = json.Unmarshal(b, &l)
	}
	if err != nil {
		return m, fmt.Errorf("%s: no measurements from the launcher (%v, %v): %s", strings.Join(p.argv, " "), err, werr, tail(m.Stderr))
	}
	m.Started = time.Unix(0, l.StartNs)
	m.Wall = time.Duration(l.EndNs - l.StartNs)
	m.MaxRSS = l.MaxRSS
	m.CPU = time.Duration(l.CPUNs)
	m.Code = l.Code
	if p.until != nil {
		m.Reached = !milestone.IsZero()
		if !m.Reached {
			return m, fmt.Errorf("%s ended before its milestone (exit %d): %s", strings.Join(p.argv, " "), m.Code, tail(m.Stderr))
		}
		m.Wall = milestone.Sub(m.Started)
	} else if m.Code != 0 {
		return m, fmt.Errorf("%s: exit code %d: %s", strings.Join(p.argv, " "), m.Code, tail(m.Stderr))
	}
	if p.ua != "" {
		// A request is logged when its response is complete, which may be just after the
		// process read it: wait until a request made after the process ended is in the log.
		if err := c.auditBarrier(ctx, from); err != nil {
			return m, err
		}
		rs, err := c.audit.requests(from, p.ua)
		if err != nil {
			return m, err
		}
		m.Requests = rs[p.ua]
	}
	return m, nil
}

func tail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 600 {
		s = "…" + s[len(s)-600:]
	}
	return s
}

// median returns the run with the median wall time (runs sorted by wall time).
func median(ms []measured) measured {
	s := append([]measured(nil), ms...)
	sort.Slice(s, func(i, j int) bool { return s[i].Wall < s[j].Wall })
	return s[len(s)/2]
}

// spread is "min–max" of the wall times.
func spread(ms []measured) string {
	if len(ms) < 2 {
		return ""
	}
	lo, hi := ms[0].Wall, ms[0].Wall
	for _, m := range ms {
		lo, hi = min(lo, m.Wall), max(hi, m.Wall)
	}
	return fmt.Sprintf("%s–%s", secs(lo), secs(hi))
}

func secs(d time.Duration) string {
	switch {
	case d < 10*time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	default:
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
}

// launched is what hack/bench/launch writes about the process it ran.
type launched struct {
	StartNs int64 `json:"startNs"` // unix ns just before the start
	EndNs   int64 `json:"endNs"`   // unix ns after the exit
	MaxRSS  int64 `json:"maxRSSKiB"`
	CPUNs   int64 `json:"cpuNs"` // user + system
	Code    int   `json:"code"`
}
