package agent

import (
	"context"
	"net"

	"google.golang.org/grpc/credentials"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/agentrpc"
)

// observedCreds counts every client TLS handshake and classifies failures from the
// typed error, before gRPC turns it into a status message.
type observedCreds struct {
	credentials.TransportCredentials
	a *Agent
}

func (c *observedCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ClientHandshake(ctx, authority, raw)
	if err != nil {
		reason := agentrpc.HandshakeReason(err)
		c.a.c.handshakeFailed(reason)
		c.a.log.Debug("agent TLS handshake failed", "server", c.a.cfg.Server, "reason", reason, "error", err.Error())
		c.a.emit(Event{Kind: EventHandshakeFailed, Reason: reason, Err: err})
		return nil, nil, err
	}
	c.a.c.handshakes.Add(1)
	if ti, ok := info.(credentials.TLSInfo); ok {
		c.a.setServerChain(hotcert.PeerChain(ti.State))
	}
	if g := c.a.guard; g != nil {
		if ti, ok := info.(credentials.TLSInfo); ok {
			g.handshaken(ti.State)
		}
	}
	c.a.conn.Store(&conn) // the connection a client-certificate rotation re-handshakes
	return conn, info, nil
}

func (c *observedCreds) Clone() credentials.TransportCredentials {
	return &observedCreds{TransportCredentials: c.TransportCredentials.Clone(), a: c.a}
}
