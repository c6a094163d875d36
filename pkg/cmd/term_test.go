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

// TestEscapeTerminalMessages: the kubelet and scheduler messages a wait
// prints, through the one escaping function.
func TestEscapeTerminalMessages(t *testing.T) {
	tests := []struct{ in, want string }{
		{`Back-off pulling image "ngnix:1.27"`, `Back-off pulling image "ngnix:1.27"`},
		{"0/3 nodes are available: 3 Insufficient cpu. préemption", "0/3 nodes are available: 3 Insufficient cpu. préemption"},
		{"evil\x1b[2J\x1b]0;title\x07", `evil^[[2J^[]0;title^G`},
		{"line\r\nnext\ttab", `line\r\nnext` + "\t" + `tab`},
		{"rtl \u202egpj.exe", `rtl \u202egpj.exe`},
		{"bad utf8 \xff", `bad utf8 \xff`},
		{"replacement \ufffd kept", "replacement \ufffd kept"},
	}
	for _, tt := range tests {
		if got := escapeTerminal(tt.in); got != tt.want {
			t.Errorf("escapeTerminal(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
