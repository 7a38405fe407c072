package proxy

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/drain"
)

// Mode is what a proxy understands of the traffic it forwards.
type Mode string

const (
	// ModeTCP forwards bytes: any protocol over TLS.
	ModeTCP Mode = "tcp"
	// ModeHTTP proxies HTTP/1.1, HTTP/2 and gRPC requests.
	ModeHTTP Mode = "http"
)

// Defaults of the options.
const (
	DefaultDrainWindow = 10 * time.Second
	DefaultGrace       = drain.DefaultGrace
	DefaultIdle        = time.Second
	// DefaultPeerHeader is the header WithPeerHeader("") names: Envoy's.
	DefaultPeerHeader = "X-Forwarded-Client-Cert"
)

// Option configures a [Server] or a [Client].
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	mode       Mode
	trust      hotcert.Provider
	deny       drain.DenyList // WithDenyList (revocation.go)
	allow      Allow
	peerHeader string
	proxyProto bool
	window     time.Duration
	grace      time.Duration
	idle       time.Duration
	maxAge     time.Duration
	nextProtos []string
	serverName string
	backendH2C bool
	logger     *slog.Logger
	observer   drain.Observer
	component  string
	logKey     string
}

func newConfig(opts []Option) (config, error) {
	c := config{
		mode: ModeTCP, window: DefaultDrainWindow, grace: DefaultGrace, idle: DefaultIdle,
		logger: slog.New(slog.NewTextHandler(io.Discard, nil)), component: "proxy", logKey: "component",
	}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	switch {
	case c.mode != ModeTCP && c.mode != ModeHTTP:
		return c, fmt.Errorf("proxy: mode %q: want %q or %q", c.mode, ModeTCP, ModeHTTP)
	case c.peerHeader != "" && c.mode != ModeHTTP:
		return c, fmt.Errorf("proxy: a peer header needs mode %q (mode %q passes the peer with the PROXY protocol)", ModeHTTP, c.mode)
	case c.proxyProto && c.mode != ModeTCP:
		return c, fmt.Errorf("proxy: the PROXY protocol needs mode %q (mode %q passes the peer in a header)", ModeTCP, c.mode)
	case c.maxAge != 0 && c.mode != ModeTCP:
		return c, fmt.Errorf("proxy: a maximum connection age is for mode %q (mode %q drains per request)", ModeTCP, c.mode)
	case c.window < 0 || c.grace < 0 || c.idle <= 0 || c.maxAge < 0:
		return c, fmt.Errorf("proxy: drain window %s, grace %s, idle %s: want window and grace >= 0, idle > 0", c.window, c.grace, c.idle)
	}
	return c, c.allow.check()
}

func (c *config) drainOptions() []drain.Option {
	opts := []drain.Option{drain.WithGrace(c.grace), drain.WithLogger(c.logger), drain.WithComponent(c.component), drain.WithComponentLabel(c.logKey)}
	if c.observer != nil {
		opts = append(opts, drain.WithObserver(c.observer))
	}
	return opts
}

// WithMode sets what the proxy understands of the traffic (default [ModeTCP]).
func WithMode(m Mode) Option { return optionFunc(func(c *config) { c.mode = m }) }

// WithTrust sets the CA bundle peers are verified against. For a [Server] it turns
// on mTLS: every client must present a certificate that chains to p's bundle, and a
// connection whose client no longer verifies after the bundle changes is cut. For
// a [Client] it is the bundle the remote server is verified against (default: the
// identity provider's own bundle).
func WithTrust(p hotcert.Provider) Option { return optionFunc(func(c *config) { c.trust = p }) }

// WithAllow authorizes peers by identity after their chain verified (default:
// every verified peer). A Server applies it to client certificates, a Client to the
// remote server's certificate.
func WithAllow(a Allow) Option { return optionFunc(func(c *config) { c.allow = a }) }

// WithPeerHeader passes the verified client identity to the backend in the header
// name ("" names [DefaultPeerHeader]), in the style of Envoy's
// X-Forwarded-Client-Cert: Hash (SHA-256 of the leaf, hex), Subject, URI and DNS
// elements. Any header of that name the client sent is removed first. [ModeHTTP] only.
func WithPeerHeader(name string) Option {
	return optionFunc(func(c *config) {
		if name == "" {
			name = DefaultPeerHeader
		}
		c.peerHeader = http.CanonicalHeaderKey(name) // the form the header map holds
	})
}

// WithProxyProtocol starts every backend connection with a PROXY protocol v2 header
// carrying the client's address and, with mTLS, its verified identity. [ModeTCP] only.
func WithProxyProtocol() Option { return optionFunc(func(c *config) { c.proxyProto = true }) }

// WithDrainWindow spreads the reconnects after a rotation of the proxy's own
// certificate over d (default [DefaultDrainWindow]; 0 drains all at once).
func WithDrainWindow(d time.Duration) Option { return optionFunc(func(c *config) { c.window = d }) }

// WithGrace bounds how long a drained connection may stay busy before it is closed
// (default [DefaultGrace]), and how long Shutdown waits at most.
func WithGrace(d time.Duration) Option { return optionFunc(func(c *config) { c.grace = d }) }

// WithIdle sets how long a TCP connection must move no byte to count as idle, when
// a drain closes idle connections first (default [DefaultIdle]).
func WithIdle(d time.Duration) Option { return optionFunc(func(c *config) { c.idle = d }) }

// WithMaxConnectionAge bounds how long a [ModeTCP] connection lives, rotation or
// not: once about d old (+/-10%), it is closed as soon as it is idle, and after the
// grace period at the latest (0, the default: no bound). It moves long-lived
// connections onto the current certificate and trust even when the proxy does not
// see a rotation (material read at each handshake by the other side).
func WithMaxConnectionAge(d time.Duration) Option {
	return optionFunc(func(c *config) { c.maxAge = d })
}

// WithNextProtos sets the ALPN protocols of [ModeTCP] (e.g. "h2" in front of a gRPC
// server: gRPC clients refuse a connection that negotiated none). [ModeHTTP]
// always offers "h2" and "http/1.1".
func WithNextProtos(protos ...string) Option {
	return optionFunc(func(c *config) { c.nextProtos = append(c.nextProtos, protos...) })
}

// WithServerName sets the name a [Client] expects in the remote server's
// certificate and sends as SNI (default: the remote's host).
func WithServerName(name string) Option { return optionFunc(func(c *config) { c.serverName = name }) }

// WithBackendH2C makes a [ModeHTTP] Server speak HTTP/2 without TLS (h2c, prior
// knowledge) to its backend for every request. Without it, gRPC requests go over
// h2c and the others over HTTP/1.1.
func WithBackendH2C() Option { return optionFunc(func(c *config) { c.backendH2C = true }) }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) {
		if l != nil {
			c.logger = l
		}
	})
}

// WithObserver reports drains and cuts to o (metrics.NewDrain counts them).
func WithObserver(o drain.Observer) Option { return optionFunc(func(c *config) { c.observer = o }) }

// WithComponent names the proxy in logs and metric labels (default "proxy").
func WithComponent(name string) Option { return optionFunc(func(c *config) { c.component = name }) }

// WithComponentLabel names the log attribute that carries the component (default
// "component"), as drain.WithComponentLabel does.
func WithComponentLabel(name string) Option {
	return optionFunc(func(c *config) {
		if name != "" {
			c.logKey = name
		}
	})
}

func randWithin(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return rand.N(d)
}
