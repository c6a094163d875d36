package cmd

import (
	"bytes"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// TestPrefixSafe: a prefixed line keeps its text and colours, and loses
// every way to move the cursor back over the prefix or rewrite it.
func TestPrefixSafe(t *testing.T) {
	tests := []struct {
		name, line, want string
	}{
		{"plain text", "hello world\tok", "hello world\tok"},
		{"utf-8 text", "größe ✓ 日本", "größe ✓ 日本"},
		{"colours pass, reset at the end", "\x1b[31mred\x1b[0m and \x1b[1;32mbold", "\x1b[31mred\x1b[0m and \x1b[1;32mbold\x1b[0m"},
		{"carriage return would overwrite the prefix", "x\r[other] forged", `x\r[other] forged`},
		{"CRLF ending stays", "windows\r", "windows\r"},
		{"backspaces", "ab\b\b\b\b[x]", "ab^H^H^H^H[x]"},
		{"cursor movement", "\x1b[2K\x1b[1G[other] forged", "^[[2K^[[1G[other] forged"},
		{"cursor up", "\x1b[A[other] forged", "^[[A[other] forged"},
		{"OSC title", "\x1b]0;pwned\x07", "^[]0;pwned^G"},
		{"ESC at the end", "end\x1b", "end^["},
		{"C1 CSI", "a\u009b2Kb", `a\u009b2Kb`},
		{"8-bit CSI byte", "a\x9b2Kb", `a\x9b2Kb`},
		{"other invalid bytes pass", "latin-1 \xe9t\xe9", "latin-1 \xe9t\xe9"},
		{"DEL and NUL", "a\x7fb\x00", "a^?b^@"},
		{"SGR too long is escaped", "\x1b[" + strings.Repeat("1;", 40) + "m", "^[[" + strings.Repeat("1;", 40) + "m"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(prefixSafe([]byte("[web] "), []byte(tt.line)))
			if diff := cmp.Diff("[web] "+tt.want, got); diff != "" {
				t.Errorf("prefixSafe(%q) (-want +got):\n%s", tt.line, diff)
			}
		})
	}
}

// TestLineWriter: lines go out whole and prefixed however the stream is
// cut, two streams never mix mid-line, an over-long line is split into
// prefixed lines, and the last line without a newline is ended only when
// prefixed.
func TestLineWriter(t *testing.T) {
	var buf bytes.Buffer
	out := &lineOut{w: &buf}
	a := out.stream("[a] ", true)
	b := out.stream("[b] ", true)
	for _, w := range []struct {
		w io.Writer
		s string
	}{{a, "one "}, {b, "uno\ndos "}, {a, "two\nthree"}, {b, "tres\n"}} {
		if _, err := w.w.Write([]byte(w.s)); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	want := "[b] uno\n[a] one two\n[b] dos tres\n[a] three\n"
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("interleaved streams (-want +got):\n%s", diff)
	}

	buf.Reset()
	raw := out.stream("", false)
	_, _ = raw.Write([]byte("a\r\x1b[2Kb\nno newline"))
	_ = raw.Close()
	if got := buf.String(); got != "a\r\x1b[2Kb\nno newline" {
		t.Errorf("unprefixed stream = %q, want the bytes unchanged", got)
	}

	buf.Reset()
	long := out.stream("[l] ", true)
	_, _ = long.Write(bytes.Repeat([]byte("x"), maxLine+3))
	_, _ = long.Write([]byte("\n"))
	_ = long.Close()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 2 || lines[0] != "[l] "+strings.Repeat("x", maxLine) || lines[1] != "[l] xxx" {
		t.Errorf("an over-long line came out as %d lines (first %d bytes)", len(lines), len(lines[0]))
	}
}

// TestLineWriterConcurrent: many streams writing at once (run with -race)
// produce only whole lines.
func TestLineWriterConcurrent(t *testing.T) {
	var buf bytes.Buffer
	out := &lineOut{w: &buf}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := out.stream("["+string(rune('a'+i))+"] ", true)
			for range 200 {
				// A line cut in three writes.
				_, _ = w.Write([]byte("part1 "))
				_, _ = w.Write([]byte("part2 "))
				_, _ = w.Write([]byte("end\n"))
			}
			_ = w.Close()
		}()
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 8*200 {
		t.Fatalf("%d lines, want %d", len(lines), 8*200)
	}
	for _, l := range lines {
		if len(l) != len("[a] part1 part2 end") || !strings.HasSuffix(l, "] part1 part2 end") {
			t.Fatalf("a mixed line: %q", l)
		}
	}
}

func TestPrefixNames(t *testing.T) {
	ws := []store.Workload{
		{RuntimeID: "k8s-default|deployment|web", Kind: "deployment", Name: "web"},
		{RuntimeID: "k8s-default|job|web", Kind: "job", Name: "web"},
		{RuntimeID: "k8s-default|job|task", Kind: "job", Name: "task"},
		{RuntimeID: "k8s-team-b|job|task2", Kind: "job", Name: "task2"},
		{RuntimeID: "k8s-team-b|deployment|api", Kind: "deployment", Name: "api"},
		{RuntimeID: "k8s-team-c|deployment|api", Kind: "deployment", Name: "api"},
	}
	want := []string{"deployment/web", "job/web", "task", "task2", "k8s-team-b|deployment|api", "k8s-team-c|deployment|api"}
	if diff := cmp.Diff(want, prefixNames(ws)); diff != "" {
		t.Errorf("prefixNames (-want +got):\n%s", diff)
	}
}

// BenchmarkLineWriter: prefixed, cleaned lines of 100 bytes, written in
// 32 KiB chunks as a log stream arrives.
func BenchmarkLineWriter(b *testing.B) {
	line := "2026-12-01T10:00:00Z INFO \x1b[32mGET\x1b[0m /orders/4411 200 1.2ms user=alice trace=0af7651916cd43dd\n"
	chunk := []byte(strings.Repeat(line, 32*1024/len(line)))
	out := &lineOut{w: io.Discard}
	w := out.stream("\x1b[96m[web]\x1b[0m ", true)
	b.SetBytes(int64(len(chunk)))
	for b.Loop() {
		if _, err := w.Write(chunk); err != nil {
			b.Fatal(err)
		}
	}
}
