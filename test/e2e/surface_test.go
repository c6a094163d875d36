package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// TestSurface covers flags and forms that no other e2e test reaches, each through the real
// kubectl on the real control plane: run --detach and run -o json|yaml, wait --for=terminal and
// --for=deleted, recover without --once and recover --once -o json, doctor -o json, logs --since
// and --previous, exec -c, and kubectl's --as/--as-group.
func TestSurface(t *testing.T) {
	e := newMonEnv(t)

	t.Run("run --detach -o json, then wait --for=terminal", func(t *testing.T) {
		r := e.runOK("run", "detached", "--kind", "job", "--image", monImage, "--label", labelRunFor+"=3s", "--detach", "-o", "json", "--timeout", "2m")
		var w monWorkload
		if err := json.Unmarshal([]byte(r.stdout), &w); err != nil {
			t.Fatalf("run -o json printed no record: %v\n%s", err, r)
		}
		// --detach returns once started: the job runs for 3 s more.
		if w.Kind != "job" || w.Name != "detached" || w.State != "running" || w.UID == "" {
			t.Errorf("run --detach -o json: %+v, want the running job's record with its UID", w)
		}
		e.runOK("wait", "--for=terminal", w.RuntimeID, "--timeout", "2m")
		if got := e.records()[w.RuntimeID].State; got != "exited" {
			t.Errorf("after wait --for=terminal: state %q, want exited", got)
		}
	})

	t.Run("run -o yaml, delete, wait --for=deleted", func(t *testing.T) {
		r := e.runOK("run", "yamlweb", "--image", monImage, "-o", "yaml", "--timeout", "2m")
		var w monWorkload
		if err := yaml.Unmarshal([]byte(r.stdout), &w); err != nil {
			t.Fatalf("run -o yaml printed no record: %v\n%s", err, r)
		}
		if w.Kind != "deployment" || w.State != "running" || !strings.HasSuffix(w.RuntimeID, "|deployment|yamlweb") {
			t.Errorf("run -o yaml: %+v, want the running deployment's record", w)
		}
		e.runOK("delete", w.RuntimeID)
		e.runOK("wait", "--for=deleted", w.RuntimeID, "--timeout", "2m")
		if _, err := client(t).AppsV1().Deployments(e.ns).Get(t.Context(), "yamlweb", metav1.GetOptions{}); err == nil {
			t.Error("wait --for=deleted returned while the deployment exists")
		}
	})

	t.Run("recover follows what is created after it started", func(t *testing.T) {
		// A running job, so that recover has informers to start.
		e.runOK("create", "holder", "--kind", "job", "--image", monImage, "--label", labelHold+"=true")
		rec := e.start("recover", "-o", "json", "-v=6")
		// Its informers are up (their watches are in its -v=6 log): the job below is new to it.
		waitFor(t, time.Minute, func() (bool, error) {
			for _, m := range monResponseLine.FindAllStringSubmatch(rec.stderr.String(), -1) {
				if strings.Contains(m[2], "/jobs?") && strings.Contains(m[2], "watch=true") {
					return true, nil
				}
			}
			return false, nil
		})
		id := strings.TrimSpace(e.runOK("create", "later", "--kind", "job", "--image", monImage, "--label", labelRunFor+"=2s").stdout)
		e.waitStates(2*time.Minute, map[string]string{id: "exited"})
		r := rec.interrupt()
		var started, exited bool
		values := jsonValues(t, r.stdout)
		for _, v := range values {
			var ev monEvent
			if json.Unmarshal(v, &ev) != nil || ev.RuntimeID != id {
				continue
			}
			started = started || ev.Type == "ContainerStarted"
			exited = exited || ev.Type == "ContainerExited"
		}
		if !started || !exited {
			t.Errorf("recover printed no ContainerStarted and ContainerExited of %s:\n%s", id, r.stdout)
		}
		// Interrupted, it ends with its summary.
		var summary struct{ Reattached *int }
		if err := json.Unmarshal(values[len(values)-1], &summary); err != nil || summary.Reattached == nil {
			t.Errorf("recover -o json: the last value is not its summary: %v\n%s", err, r.stdout)
		}
	})

	t.Run("recover --once -o json", func(t *testing.T) {
		r := e.runOK("recover", "--once", "-o", "json")
		values := jsonValues(t, r.stdout)
		var summary map[string]any
		if err := json.Unmarshal(values[len(values)-1], &summary); err != nil {
			t.Fatalf("recover --once -o json: the last value is not an object: %v\n%s", err, r)
		}
		for _, k := range []string{"reattached", "changed", "terminal"} {
			if _, ok := summary[k]; !ok {
				t.Errorf("recover --once -o json summary %v has no %q", summary, k)
			}
		}
	})

	t.Run("doctor -o json", func(t *testing.T) {
		r := e.run("doctor", "-o", "json")
		var checks []struct {
			Check   string `json:"check"`
			OK      bool   `json:"ok"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &checks); err != nil {
			t.Fatalf("doctor -o json: %v\n%s", err, r)
		}
		allOK := true
		byName := map[string]bool{}
		for _, c := range checks {
			byName[c.Check] = c.OK
			allOK = allOK && c.OK
		}
		if !byName["api server"] {
			t.Errorf("doctor -o json: api server check not ok: %s", r.stdout)
		}
		if (r.code == 0) != allOK {
			t.Errorf("doctor exit %d with every check ok = %v", r.code, allOK)
		}
	})

	t.Run("logs --since, --previous; exec -c", func(t *testing.T) {
		id := strings.TrimSpace(e.runOK("run", "talker", "--image", monImage, "--timeout", "2m").stdout)
		// Every pod of the test cluster shows the shared log (docs/testing.md).
		line := "surface-since-" + e.ns
		writePodLog(t, line)
		waitFor(t, time.Minute, func() (bool, error) {
			r := e.run("logs", id, "--since", "1h")
			if r.code != 0 || !strings.Contains(r.stdout, line) {
				return false, fmt.Errorf("logs --since 1h: %s", r)
			}
			return true, nil
		})
		r := e.run("logs", id, "--previous")
		if lines := strings.Split(strings.TrimSpace(r.stderr), "\n"); r.code != 1 || len(lines) != 1 || !strings.HasPrefix(lines[0], "error: ") {
			t.Errorf("logs --previous of a container that never restarted: %s, want exit 1 and one error line", r)
		}
		if r := e.runOK("exec", id, "-c", "talker", "--", "echo", "in-talker"); r.stdout != "in-talker\n" {
			t.Errorf("exec -c talker: %s", r)
		}
		r = e.run("exec", id, "-c", "nosuch", "--", "echo", "x")
		if r.code == 0 || !strings.Contains(r.stderr, "nosuch") {
			t.Errorf("exec -c nosuch: %s, want an error naming the container", r)
		}
	})

	t.Run("--as and --as-group reach the API server", func(t *testing.T) {
		id := strings.TrimSpace(e.runOK("create", "impersonated", "--image", monImage).stdout)
		r := e.run("stop", id, "--as", "gobrave-nobody")
		if r.code != 1 || !strings.Contains(r.stderr, `User "gobrave-nobody" cannot`) {
			t.Errorf("stop --as gobrave-nobody: %s, want forbidden for that user", r)
		}
		if r := e.run("stop", id, "--as", "gobrave-nobody", "--as-group", "system:masters"); r.code != 0 {
			t.Errorf("stop --as gobrave-nobody --as-group system:masters: %s, want it allowed", r)
		}
	})
}

// jsonValues splits a stream of JSON values (event lines, then an indented summary), failing the
// test on anything else.
func jsonValues(t *testing.T, out string) []json.RawMessage {
	t.Helper()
	var vs []json.RawMessage
	dec := json.NewDecoder(strings.NewReader(out))
	for {
		var v json.RawMessage
		if err := dec.Decode(&v); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("output is not a stream of JSON values: %v\n%s", err, out)
		}
		vs = append(vs, v)
	}
	if len(vs) == 0 {
		t.Fatalf("no JSON value in %q", out)
	}
	return vs
}
