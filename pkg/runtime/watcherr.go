package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// WarnEvery is how often a list or watch that keeps failing is warned
// about again (WatchWarnings).
const WarnEvery = time.Minute

// WatchStopped reports whether a list or watch failed because its
// informer's context ended (the command was interrupted, or is done), not
// because of the cluster.
func WatchStopped(ctx context.Context, err error) bool {
	return ctx.Err() != nil || errors.Is(err, context.Canceled)
}

// WatchWarnings is a reflector's watch error handler for a command with a
// person or a runbook at the other end. client-go's default handler printed
// every failed retry as a klog error line carrying the whole request URL:
// against an unreachable server, `wait` and `monitor` printed two to six
// such lines of ~400 characters above their own one-line error. Here a
// failure of the list or watch of what (e.g. `jobs in namespace "default"
// at 10.0.0.1:6443`) is said once, in one line through warn, with its
// cause (Brief), and again at most every WarnEvery while it keeps failing,
// with the number of failures in between: a `monitor --follow` across an
// API server restart says so, once a minute, not once a retry. The full
// error goes to klog at -v=2.
//
// A watch that ends with its informer (WatchStopped) is no error. A watch
// closed by the server or expired is the reflector's routine: it goes to
// client-go's default handler, which logs it at -v=1 or -v=4 only. With a
// nil warn, every failure goes to the default handler.
func WatchWarnings(what string, warn func(string)) cache.WatchErrorHandlerWithContext {
	w := &watchWarner{what: what, warn: warn, every: WarnEvery, now: time.Now}
	return w.handle
}

// watchWarner is the state of one reflector's WatchWarnings.
type watchWarner struct {
	what  string
	warn  func(string)
	every time.Duration
	now   func() time.Time

	mu     sync.Mutex
	warned time.Time // when the last warning was given (zero: never)
	missed int       // failures since, not warned about
}

func (w *watchWarner) handle(ctx context.Context, r *cache.Reflector, err error) {
	switch {
	case WatchStopped(ctx, err):
		return
	case w.warn == nil || routineWatchEnd(err):
		cache.DefaultWatchErrorHandler(ctx, r, err)
		return
	}
	klog.FromContext(ctx).V(2).Info("Failed to watch", "what", w.what, "err", err)
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	if !w.warned.IsZero() && now.Sub(w.warned) < w.every {
		w.missed++
		return
	}
	retrying := "retrying"
	if w.missed > 0 {
		retrying = fmt.Sprintf("retrying; %d more failures since the last warning", w.missed)
	}
	w.warned, w.missed = now, 0
	w.warn(fmt.Sprintf("cannot list or watch %s (%s): %v", w.what, retrying, Brief(err)))
}

// routineWatchEnd reports whether err ends a watch in the ordinary course:
// the server closed it, or its resource version expired. The reflector
// lists or watches again at once; client-go logs these at -v=1 or -v=4.
func routineWatchEnd(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
}

// Brief is err said without the request behind it. A reflector's error
// names the Go type it lists and a failed request's method and whole URL,
// query included ("failed to list *v1.Job: Get \"https://10.0.0.1:6443/apis/batch/v1/namespaces/default/jobs?allowWatchBookmarks=true&...\":
// dial tcp 10.0.0.1:6443: connect: connection refused"), where a message
// that already names what was listed and the server needs only the cause:
// the API server's own answer (a status error's message), or what became
// of the request ("dial tcp 10.0.0.1:6443: connect: connection refused").
// The result unwraps to err (errors.Is and errors.As still see it all).
// Any other error is returned as it is; nil stays nil.
func Brief(err error) error {
	var (
		se *apierrors.StatusError
		ue *url.Error
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se):
		return &briefError{err: err, msg: se.Error()}
	case errors.As(err, &ue) && ue.Err != nil:
		return &briefError{err: err, msg: ue.Err.Error()}
	}
	return err
}

type briefError struct {
	err error
	msg string
}

func (e *briefError) Error() string { return e.msg }
func (e *briefError) Unwrap() error { return e.err }
