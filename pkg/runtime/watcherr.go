package runtime

import (
	"context"
	"errors"

	"k8s.io/client-go/tools/cache"
)

// WatchStopped reports whether a list or watch failed because its
// informer's context ended (the command was interrupted, or is done), not
// because of the cluster.
func WatchStopped(ctx context.Context, err error) bool {
	return ctx.Err() != nil || errors.Is(err, context.Canceled)
}

// QuietOnStop is a reflector's watch error handler: client-go's default,
// except for a watch that ends with its informer (WatchStopped), which is
// no error. The default handler printed that one ("Failed to watch ...
// context canceled") on stderr above the command's own one-line error.
func QuietOnStop(ctx context.Context, r *cache.Reflector, err error) {
	if WatchStopped(ctx, err) {
		return
	}
	cache.DefaultWatchErrorHandler(ctx, r, err)
}
