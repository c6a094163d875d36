package e2e

// ps -w on the real control plane: a watch prints the listing, then a row for a change that
// another process (a `kubectl gobrave stop` run beside it) records, and ends with exit 0 on
// SIGTERM and SIGINT. It reads the database only: it holds no lease and makes no request.

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestWatchE2E(t *testing.T) {
	t.Parallel()
	e := newMonEnv(t)
	ids := e.create(monDeployment("watched"), monDeployment("unwatched", "team=other"))
	watched, unwatched := ids[0], ids[1]
	e.runOK("wait", "--for", "started", watched, unwatched)

	table := e.start("ps", "-w", "-l", "app=watched")
	lines := e.start("ps", "-w", "-o", "json", "-l", "app=watched")
	only := e.start("ps", "--watch-only", "-o", "name")
	printed := func(p *monProc, want string) func() (bool, error) {
		return func() (bool, error) { return strings.Contains(p.stdout.String(), want), nil }
	}
	// The listing first (the watch then polls from the event read before it).
	waitFor(t, waitTimeout, printed(table, watched))
	waitFor(t, waitTimeout, printed(lines, watched))

	// Another process stops both workloads and waits until the monitor records exited.
	e.runOK("stop", watched, unwatched, "--wait", "--timeout", "90s")

	waitFor(t, waitTimeout, func() (bool, error) {
		for _, l := range strings.Split(table.stdout.String(), "\n") {
			if f := strings.Fields(l); len(f) >= 3 && f[0] == watched && f[2] == "exited" {
				return true, nil
			}
		}
		return false, nil
	})
	waitFor(t, waitTimeout, func() (bool, error) {
		var last monWorkload
		for _, l := range strings.Split(strings.TrimSpace(lines.stdout.String()), "\n") {
			if err := json.Unmarshal([]byte(l), &last); err != nil {
				return false, err
			}
		}
		return last.State == "exited", nil
	})
	waitFor(t, waitTimeout, printed(only, unwatched))

	for _, p := range []struct {
		proc *monProc
		sig  syscall.Signal
	}{{table, syscall.SIGTERM}, {lines, syscall.SIGINT}, {only, syscall.SIGTERM}} {
		if err := p.proc.cmd.Process.Signal(p.sig); err != nil {
			t.Fatal(err)
		}
		r := p.proc.wait(30 * time.Second)
		if r.code != 0 {
			t.Errorf("ps -w after %s: %s, want exit 0", p.sig, r)
		}
	}
	out := table.stdout.String()
	if strings.Contains(out, unwatched) {
		t.Errorf("the table watch of -l app=watched printed %s:\n%s", unwatched, out)
	}
	if strings.Count(out, "RUNTIME ID") != 1 {
		t.Errorf("want one header:\n%s", out)
	}
	for _, l := range strings.Split(strings.TrimSpace(lines.stdout.String()), "\n") {
		var w monWorkload
		if err := json.Unmarshal([]byte(l), &w); err != nil || w.RuntimeID != watched {
			t.Errorf("-o json -w line %q: %v (want one %s object per line)", l, err, watched)
		}
	}
	if o := only.stdout.String(); strings.Contains(o, "RUNTIME ID") || !strings.Contains(o, watched) {
		t.Errorf("--watch-only -o name: %q, want changed IDs only", o)
	}
}
