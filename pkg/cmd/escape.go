package cmd

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// escapeTerminal makes text from the cluster, the state database or the
// user safe to print on a terminal: a condition or termination message, a
// command, a label or a server's error can carry OSC, CSI or DCS sequences
// that retitle or clear the terminal, move the cursor over earlier lines or
// (OSC 52) write the clipboard.
//
// Every C0 control character but tab, DEL and every C1 control character
// becomes visible text, in the caret form kubectl's own
// printers.EscapeTerminal uses for ESC (ESC is ^[, as `cat -v` and the
// terminal's own echo show it):
//
//	ESC -> ^[   BEL -> ^G   other C0 -> ^@ … ^_   DEL -> ^?
//	CR  -> \r   LF  -> \n   (a message stays on its line or table row)
//	C1 (U+0080–U+009F, e.g. the one-character CSI U+009B) -> \u009b
//	bidirectional controls (U+200E/F, U+202A–E, U+2066–9) -> \u202e
//	a byte that is not UTF-8 (e.g. a lone 0x9b, CSI on an 8-bit terminal) -> \x9b
//
// Valid UTF-8 text, tabs included, is returned unchanged. The result is for
// people and cannot be reversed: -o json and -o yaml print the exact bytes.
func escapeTerminal(s string) string {
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if needsEscape(r, size) {
			break
		}
		i += size
	}
	if i == len(s) {
		return s // the common case: nothing to escape, no allocation
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case !needsEscape(r, size):
			b.WriteString(s[i : i+size])
		case r == utf8.RuneError:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\n':
			b.WriteString(`\n`)
		case r < 0x20:
			b.WriteByte('^')
			b.WriteByte(byte(r) + '@')
		case r == 0x7f:
			b.WriteString("^?")
		default: // C1, bidirectional controls
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += size
	}
	return b.String()
}

// needsEscape reports whether the rune r, decoded from size bytes, is a
// control character (tab aside) or a byte that is not UTF-8.
func needsEscape(r rune, size int) bool {
	switch {
	case r == utf8.RuneError && size <= 1:
		return true
	case r == '\t':
		return false
	case r < 0x20, r == 0x7f:
		return true
	case r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		// Bidirectional controls reorder what follows on the line, so a
		// message can show text other than what it holds ("Trojan Source").
		return true
	}
	return false
}
