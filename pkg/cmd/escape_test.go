package cmd

import (
	"testing"
	"unicode/utf8"
)

func TestEscapeTerminal(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{name: "plain ASCII", in: "exit code 1: boom", want: "exit code 1: boom"},
		{name: "empty", in: "", want: ""},
		{name: "UTF-8 text kept intact", in: "échec: 失败 ✗ — Ω", want: "échec: 失败 ✗ — Ω"},
		{name: "tab kept", in: "a\tb", want: "a\tb"},
		{name: "OSC 52 clipboard write with BEL", in: "\x1b]52;c;cm0gLXJmIH4=\x07", want: "^[]52;c;cm0gLXJmIH4=^G"},
		{name: "OSC 52 with ST", in: "\x1b]52;c;eA==\x1b\\", want: `^[]52;c;eA==^[\`},
		{name: "OSC 0 retitle", in: "\x1b]0;pwned\x07ok", want: "^[]0;pwned^Gok"},
		{name: "CSI clear screen and home", in: "\x1b[2J\x1b[Hdone", want: "^[[2J^[[Hdone"},
		{name: "C1 CSI as a UTF-8 rune", in: "\u009b2J", want: `\u009b2J`},
		{name: "C1 OSC as a UTF-8 rune", in: "\u009d52;c;eA==\u009c", want: `\u009d52;c;eA==\u009c`},
		{name: "lone 0x9b byte, not UTF-8", in: "a\x9b2Jb", want: `a\x9b2Jb`},
		{name: "invalid UTF-8 sequence", in: "\xff\xfeok\xc3", want: `\xff\xfeok\xc3`},
		{name: "newline and carriage return stay on the line", in: "line1\r\nline2", want: `line1\r\nline2`},
		{name: "NUL and backspace", in: "a\x00b\x08c", want: "a^@b^Hc"},
		{name: "DEL", in: "x\x7fy", want: "x^?y"},
		{name: "unit separator", in: "\x1f", want: "^_"},
		{name: "U+00A0 is not C1", in: "a\u00a0b", want: "a\u00a0b"},
		{name: "replacement character itself is text", in: "\uFFFD", want: "\uFFFD"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := escapeTerminal(tt.in)
			if got != tt.want {
				t.Errorf("escapeTerminal(%q) = %q, want %q", tt.in, got, tt.want)
			}
			for i := 0; i < len(got); i++ {
				if c := got[i]; (c < 0x20 && c != '\t') || c == 0x7f {
					t.Errorf("escapeTerminal(%q) left control byte %#x in %q", tt.in, c, got)
				}
			}
		})
	}
}

// FuzzEscapeTerminal: whatever the input, no control byte survives, and
// text without any is returned as is.
func FuzzEscapeTerminal(f *testing.F) {
	for _, s := range []string{"\x1b]52;c;eA==\x07", "\u009b2J", "\x9b", "ok", "a\tb\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got := escapeTerminal(in)
		if !utf8.ValidString(got) {
			t.Fatalf("escapeTerminal(%q) = %q is not UTF-8", in, got)
		}
		clean := true
		for _, r := range got {
			if r == 0x7f || (r < 0x20 && r != '\t') || (r >= 0x80 && r <= 0x9f) {
				t.Fatalf("escapeTerminal(%q) = %q keeps control %U", in, got, r)
			}
		}
		for i := 0; i < len(in); {
			r, size := utf8.DecodeRuneInString(in[i:])
			if needsEscape(r, size) {
				clean = false
			}
			i += size
		}
		if clean && got != in {
			t.Fatalf("escapeTerminal(%q) = %q changed clean text", in, got)
		}
	})
}

// BenchmarkEscapeTerminal: text without control characters (nearly every
// message) is returned as is, without allocating.
func BenchmarkEscapeTerminal(b *testing.B) {
	for _, bc := range []struct{ name, in string }{
		{"clean", "exit code 1 (Error): BackoffLimitExceeded: Job has reached the specified backoff limit"},
		{"hostile", "exit code 1 (Error): \x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\u009b31m\xff\nnext"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = escapeTerminal(bc.in)
			}
		})
	}
}
