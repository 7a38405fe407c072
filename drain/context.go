package drain

import (
	"context"

	"google.golang.org/grpc"
)

type connKey struct{}

func withConn(ctx context.Context, c *conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// Draining returns a channel that is closed when the connection serving the RPC of
// ctx starts draining. A long-lived stream handler should select on it and return
// (status OK) so the client re-opens the stream on a new connection at once, instead
// of waiting for the grace period to cut it. Outside a drain.Server it returns nil
// (a channel that never fires).
func Draining(ctx context.Context) <-chan struct{} {
	c, _ := ctx.Value(connKey{}).(*conn)
	if c == nil {
		return nil
	}
	return c.drainCh
}

// connStream carries the connection in the stream's context.
type connStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *connStream) Context() context.Context { return s.ctx }
