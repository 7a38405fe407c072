package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/drain"
	"github.com/hotcert/hotcert/tlsconfig"
)

// Server terminates TLS (mTLS with WithTrust) and forwards to a plaintext backend.
// Create it with [NewServer], run it with [Server.Serve], end it with
// [Server.Shutdown].
type Server struct {
	cfg     config
	target  Target
	ids     []hotcert.Provider
	tls     *tls.Config
	serving atomic.Bool

	http *httpServer // ModeHTTP
	tcp  *tcpServer  // ModeTCP
}

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = errors.New("proxy: server closed")

// NewServer returns a Server that serves the identities ids (one provider per
// certificate, chosen per handshake by SNI as tlsconfig.IdentitiesServerConfig
// chooses; the first is the default) and forwards to target. Each provider that
// is a [drain.Provider] (a *hotcert.Reloader is one) drains the connections it
// served under its previous certificate when it rotates; the connections served
// the other identities stay.
func NewServer(target Target, ids []hotcert.Provider, opts ...Option) (*Server, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, errors.New("proxy: no identity to serve")
	}
	if cfg.serverName != "" {
		return nil, errors.New("proxy: a server name is for a Client, which verifies the remote by it")
	}
	s := &Server{cfg: cfg, target: target, ids: ids}
	base := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: cfg.nextProtos}
	if cfg.mode == ModeHTTP {
		base.NextProtos = []string{"h2", "http/1.1"}
	}
	if cfg.trust != nil {
		base.ClientAuth = tls.RequireAndVerifyClientCert
		base.VerifyConnection = cfg.allow.verify
	} else if !cfg.allow.Empty() {
		return nil, errors.New("proxy: an allow list needs client certificates: give the client CA bundle (WithTrust)")
	} else if cfg.deny != nil {
		return nil, errDenyWithoutTrust
	}
	s.tls = tlsconfig.IdentitiesServerConfig(ids, append([]tlsconfig.Option{tlsconfig.WithBase(base), tlsconfig.WithTrust(cfg.trust)}, cfg.denyTLS()...)...)
	if len(ids) > 1 {
		s.recordChoice(s.tls) // identities.go
	}
	switch cfg.mode {
	case ModeHTTP:
		s.http = newHTTPServer(s)
	default:
		s.tcp = newServerTCP(s)
	}
	return s, nil
}

// drainOptions are the drain policies for connections served under identity p:
// the identity drain when p reports its changes, and (first is true for exactly
// one of a Server's policy sets) the trust cut and the revocation cut.
func (s *Server) drainOptions(p hotcert.Provider, first bool) []drain.Option {
	opts := s.cfg.drainOptions()
	if dp, ok := p.(drain.Provider); ok {
		opts = append(opts, drain.WithIdentityDrain(dp, s.cfg.window))
	}
	if tp, ok := s.cfg.trust.(drain.Provider); ok && first {
		opts = append(opts, drain.WithTrustCut(tp))
	}
	if first {
		opts = append(opts, s.cfg.revocationCut()...)
	}
	return opts
}

// Serve accepts connections on ln (a plain listener: the Server does the TLS)
// until Shutdown. It returns ErrServerClosed after Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	if len(s.ids) > 1 {
		ln = servedListener{ln} // identities.go
	}
	s.serving.Store(true)
	defer s.serving.Store(false)
	if s.http != nil {
		err := s.http.srv.ServeTLS(ln, "", "")
		if errors.Is(err, http.ErrServerClosed) {
			return ErrServerClosed
		}
		return err
	}
	return s.tcp.serve(ln)
}

// Serving reports whether Serve is accepting connections: the proxy's readiness.
// Its material is loaded before the Server exists (hotcert.New fails without it).
func (s *Server) Serving() bool { return s.serving.Load() }

// Shutdown stops accepting and ends the open connections gracefully: HTTP/1
// connections after their response, HTTP/2 ones with a GOAWAY once their streams
// finish, TCP ones as soon as they are idle. When ctx ends first, what is left is
// closed and ctx's error returned.
func (s *Server) Shutdown(ctx context.Context) error {
	if s.http != nil {
		return s.http.shutdown(ctx)
	}
	return s.tcp.shutdown(ctx)
}

// Conns returns the number of open client connections.
func (s *Server) Conns() int {
	if s.http != nil {
		return s.http.conns()
	}
	return s.tcp.conns()
}

// Status says what the Server holds, for a status endpoint.
type Status struct {
	Mode       Mode              `json:"mode"`
	Target     string            `json:"target"`
	Serving    bool              `json:"serving"`
	Conns      int               `json:"connections"`
	Identities []hotcert.Summary `json:"identities"`
	ClientCAs  *hotcert.Summary  `json:"client_cas,omitempty"`
}

// Status returns the Server's status.
func (s *Server) Status() Status {
	st := Status{Mode: s.cfg.mode, Target: s.target.String(), Serving: s.Serving(), Conns: s.Conns()}
	for _, p := range s.ids {
		st.Identities = append(st.Identities, p.Current().Summary())
	}
	if s.cfg.trust != nil {
		sum := s.cfg.trust.Current().Summary()
		st.ClientCAs = &sum
	}
	return st
}

func (s *Server) String() string {
	return fmt.Sprintf("proxy server (%s) to %s", s.cfg.mode, s.target)
}
