package drain

import (
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/hotcert/hotcert"
)

// Provider is what the drain policies follow: the current material and its changes.
// A *hotcert.Reloader is one.
type Provider interface {
	hotcert.Provider
	hotcert.Notifier
}

// DefaultGrace bounds how long a drained connection's in-flight RPCs may run after
// the GOAWAY before the connection is closed.
const DefaultGrace = 30 * time.Second

// Option configures a [Server].
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	identity    Provider
	window      time.Duration
	servedBy    func(net.Conn) bool // WithServedBy; nil: every connection
	trust       Provider
	trustServer bool     // the trust cut verifies peers as servers (WithServerTrustCut)
	deny        DenyList // the revocation cut (revocation.go)
	grace       time.Duration
	logger      *slog.Logger
	observer    Observer
	component   string
	logKey      string        // the log attribute that carries component
	expiry      *expiryConfig // WithExpiryDrain (expiry.go); nil: off
	clock       hotcert.Clock
}

func defaultConfig() config {
	return config{
		grace:     DefaultGrace,
		logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		observer:  nopObserver{},
		component: "default",
		logKey:    "component",
		clock:     wallClock{},
	}
}

// WithIdentityDrain drains the connections established under a previous certificate
// of p whenever p's certificate changes, each at a uniformly random time within
// window (0 drains them all at once).
func WithIdentityDrain(p Provider, window time.Duration) Option {
	return optionFunc(func(c *config) { c.identity, c.window = p, window })
}

// WithServedBy limits the identity drain to the connections for which served
// reports true: on a server with several identities (chosen per handshake, by SNI)
// and one policy set per identity, served tells whether a connection's handshake
// chose this set's identity, so that a rotation of one identity drains only the
// connections that were served it. served is asked when the identity rotates, with
// the connection as the server accepted it (the net.Conn given to [Tracker.Track],
// the *tls.Conn of an [HTTPServer]'s http.Server); for a connection whose handshake
// has not chosen yet it should report true (the drain then errs on the safe side).
// The trust cut and the revocation cut are not limited.
func WithServedBy(served func(c net.Conn) bool) Option {
	return optionFunc(func(c *config) { c.servedBy = served })
}

// WithTrustCut drains, promptly, the connections whose peer certificate chain no
// longer verifies (for client authentication, at the current time) against p's CA
// bundle whenever that bundle changes.
func WithTrustCut(p Provider) Option {
	return optionFunc(func(c *config) { c.trust = p })
}

// WithServerTrustCut is WithTrustCut for the connections a client opened: the
// peers are servers, and their chains are re-verified for server authentication.
func WithServerTrustCut(p Provider) Option {
	return optionFunc(func(c *config) { c.trust, c.trustServer = p, true })
}

// WithGrace bounds how long in-flight RPCs of a drained connection may run after its
// GOAWAY (default [DefaultGrace]).
func WithGrace(d time.Duration) Option { return optionFunc(func(c *config) { c.grace = d }) }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) {
		if l != nil {
			c.logger = l
		}
	})
}

// WithObserver reports drains to o (metrics.NewDrain counts them in Prometheus).
func WithObserver(o Observer) Option {
	return optionFunc(func(c *config) {
		if o != nil {
			c.observer = o
		}
	})
}

// WithComponent names the server in logs and metric labels (default "default").
func WithComponent(name string) Option { return optionFunc(func(c *config) { c.component = name }) }

// WithComponentLabel names the log attribute that carries the component on the
// drain log lines (default "component"), as hotcert.WithComponentLabel does for a
// reloader's: give both the name of the metrics' component label
// (metrics.WithComponentLabel), so that one name finds a component in logs and
// metrics. An empty name keeps the default.
func WithComponentLabel(name string) Option {
	return optionFunc(func(c *config) {
		if name != "" {
			c.logKey = name
		}
	})
}
