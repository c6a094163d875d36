package cmd

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/gobrave/kubectl-gobrave/pkg/store"
)

// isTerminal reports whether w is a terminal: progress lines and colour
// are for people, never for scripts or files.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// colorEnabled reports whether w may get colour: a terminal, NO_COLOR unset
// (https://no-color.org) and not TERM=dumb.
func (f *Factory) colorEnabled(w io.Writer) bool {
	return isTerminal(w) && f.Getenv("NO_COLOR") == "" && f.Getenv("TERM") != "dumb"
}

// stateColor wraps a state in an ANSI colour. Every state gets escape codes
// of the same length, so tab-aligned columns stay aligned.
func stateColor(s store.State) string {
	code := "39" // default
	switch s {
	case store.StateRunning:
		code = "32" // green
	case store.StateFailed:
		code = "31" // red
	case store.StateStarting, store.StateStopping, store.StateCreated, store.StatePaused:
		code = "33" // yellow
	case store.StateExited, store.StateDeleted:
		code = "90" // grey
	}
	return "\x1b[" + code + "m" + string(s) + "\x1b[0m"
}

// progress prints one self-overwriting status line on a terminal and
// nothing elsewhere.
type progress struct {
	mu      sync.Mutex
	w       io.Writer
	on      bool
	start   time.Time
	printed bool
}

func newProgress(w io.Writer) *progress {
	return &progress{w: w, on: w != nil && isTerminal(w), start: time.Now()}
}

// update rewrites the status line.
func (p *progress) update(format string, a ...any) {
	if p == nil || !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "\r\x1b[K%s (%s)", escapeTerminal(fmt.Sprintf(format, a...)), time.Since(p.start).Truncate(time.Second))
	p.printed = true
}

// done clears the status line.
func (p *progress) done() {
	if p == nil || !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.printed {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}
