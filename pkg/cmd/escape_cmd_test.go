package cmd_test

import (
	"encoding/json"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// Text from the cluster and the user reaches the terminal escaped in every
// human-readable output, and exact in JSON.
func TestHumanOutputEscapesControlCharacters(t *testing.T) {
	const (
		osc52 = "\x1b]52;c;cm0gLXJmIH4=\x07"
		clear = "\x1b[2J\x1b[H"
		c1    = "\u009b31m"
	)
	h := newHarness(t)
	h.ok("create", "task", "--kind", "job", "--image", "busybox", "--", "sh", "-c", "echo "+osc52)
	msg := "pwned" + clear + c1 + "\nsecond line"
	setJobStatus(t, h, "default", "task", batchv1.JobStatus{Failed: 1, Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: msg},
	}})
	// wait fails with the failure's message on the error line.
	r := h.run("wait", "task", "--for=exited", "--timeout=30s")
	checkExit(t, r, 1, "pwned")
	for _, out := range []struct{ name, text string }{
		{"wait's error line", "error: " + r.msg},
		{"ps -o wide", h.ok("ps", "-a", "-o", "wide")},
		{"events", h.ok("events", "task")},
		{"inspect", h.ok("inspect", "task")},
	} {
		if i := strings.IndexFunc(out.text, func(r rune) bool {
			return r == 0x1b || r == 0x07 || (r >= 0x80 && r <= 0x9f)
		}); i >= 0 {
			t.Errorf("%s prints a raw control character at %d:\n%q", out.name, i, out.text)
		}
		if !strings.Contains(out.text, "^[") {
			t.Errorf("%s does not show the escape as ^[:\n%s", out.name, out.text)
		}
	}
	if strings.Contains(r.msg, "\n") {
		t.Errorf("error line is not one line: %q", r.msg)
	}
	if inspect := h.ok("inspect", "task"); !strings.Contains(inspect, "echo ^[]52;c;cm0gLXJmIH4=^G") ||
		!strings.Contains(inspect, `pwned^[[2J^[[H\u009b31m\nsecond line`) {
		t.Errorf("inspect does not show the command and message escaped:\n%s", inspect)
	}

	// JSON keeps the exact bytes.
	var evs []struct{ Type, Message string }
	if err := json.Unmarshal([]byte(h.ok("events", "task", "-o", "json")), &evs); err != nil {
		t.Fatal(err)
	}
	if last := evs[len(evs)-1]; !strings.Contains(last.Message, msg) {
		t.Errorf("events -o json message %q, want it to contain %q", last.Message, msg)
	}
	var v struct{ Message string }
	if err := json.Unmarshal([]byte(h.ok("inspect", "task", "-o", "json")), &v); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(v.Message, msg) {
		t.Errorf("inspect -o json message %q, want it to contain %q", v.Message, msg)
	}
}
