package grpccreds

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/credentials"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/tlsconfig"
)

// NewClient returns client transport credentials that handshake every new
// connection with the certificate and CA bundle current at that moment (see
// tlsconfig.Dialer). Options: tlsconfig.WithTrust for a separate CA bundle,
// tlsconfig.WithReloadOnDial to re-read it on every dial, tlsconfig.WithServerName
// (like OverrideServerName), tlsconfig.WithBase for versions or a session cache.
func NewClient(p hotcert.Provider, opts ...tlsconfig.Option) credentials.TransportCredentials {
	opts = withH2(opts)
	d := tlsconfig.NewDialer(p, opts...)
	return &clientCreds{dialer: d, shared: &delegateCache{}, serverName: d.ServerName()}
}

type clientCreds struct {
	dialer *tlsconfig.Dialer
	shared *delegateCache

	mu         sync.Mutex
	serverName string
}

// delegate is credentials.NewTLS of the config prepared for one Material.
type delegate struct {
	cfg   *tls.Config
	creds credentials.TransportCredentials
}

type delegateCache struct{ cur atomic.Pointer[delegate] }

// ClientHandshake re-reads the sources given with WithReloadOnDial, then does the
// handshake with standard credentials.NewTLS credentials built for the current
// Material (built once per change), which take the server name from authority.
func (c *clientCreds) ClientHandshake(ctx context.Context, authority string, rawConn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	cfg, err := c.dialer.Config(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("grpccreds: client handshake with %s: %w", authority, err)
	}
	d := c.shared.cur.Load()
	if d == nil || d.cfg != cfg {
		d = &delegate{cfg: cfg, creds: credentials.NewTLS(cfg)}
		c.shared.cur.Store(d)
	}
	return d.creds.ClientHandshake(ctx, authority, rawConn)
}

// ServerHandshake is not supported: use NewServer or NewMTLSServer.
func (c *clientCreds) ServerHandshake(net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("grpccreds: client credentials cannot serve; use NewServer")
}

// Info reports TLS, as credentials.NewTLS does, with the overridden server name.
func (c *clientCreds) Info() credentials.ProtocolInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	return credentials.ProtocolInfo{SecurityProtocol: "tls", SecurityVersion: "1.2", ServerName: c.serverName}
}

// Clone returns credentials that follow the same providers, with their own server
// name override.
func (c *clientCreds) Clone() credentials.TransportCredentials {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &clientCreds{dialer: c.dialer, shared: c.shared, serverName: c.serverName}
}

// OverrideServerName sets the name reported by Info, which grpc-go uses as the
// default authority of a channel and so as the name the server certificate must
// match.
//
// Deprecated: use grpc.WithAuthority, as for credentials.NewTLS.
func (c *clientCreds) OverrideServerName(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.serverName = name
	return nil
}
