package cmd

import (
	"bytes"
	"testing"

	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// Every state's escape codes have the same length, so coloured tables stay aligned.
func TestStateColorKeepsAlignment(t *testing.T) {
	for _, s := range allStates {
		got := stateColor(s)
		if extra := len(got) - len(s); extra != 9 {
			t.Errorf("stateColor(%q) adds %d bytes, want 9: %q", s, extra, got)
		}
	}
	if got := stateColor(store.StateFailed); got != "\x1b[31mfailed\x1b[0m" {
		t.Errorf("failed = %q, want red", got)
	}
}

// Progress and colour are for terminals only: a buffer (a pipe, a file, a
// script's capture) gets neither.
func TestNoProgressOrColorOffTerminal(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&buf)
	p.update("waiting for %s: %d of %d met", ConditionStarted, 1, 2)
	p.done()
	if buf.Len() != 0 {
		t.Errorf("progress wrote %q to a non-terminal", buf.String())
	}
	f := &Factory{Getenv: func(string) string { return "" }}
	if f.colorEnabled(&buf) {
		t.Error("colour enabled on a non-terminal")
	}
}
