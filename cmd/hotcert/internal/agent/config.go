package agent

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/jwtkeys"
	"github.com/hotcert/hotcert/metrics"
	"github.com/hotcert/hotcert/revocation"
)

// Components (metrics label, log attribute) of the agent's TLS material.
const (
	ComponentCA         = "agent_ca"
	ComponentClientCert = "agent_client_cert"
)

// Config configures an Agent. Server and CAFile are required.
type Config struct {
	// ID identifies the agent to the control plane (default: host name plus a
	// random suffix).
	ID string
	// Server is the control plane address, host:port (or any gRPC target with a
	// scheme, e.g. dns:///cp.ns.svc:9091).
	Server string
	// ServerName is the name the server certificate must match and the SNI sent
	// (default: the host of Server).
	ServerName string
	// CAFile is the CA bundle (one or more PEM CA certificates) the server
	// certificate is verified against. It is re-read before every connection;
	// a bundle that does not load keeps the last good one.
	CAFile string
	// CertFile and KeyFile, if set, are a client certificate presented to servers
	// that require one (mTLS), re-read before every connection too.
	CertFile, KeyFile string
	// Token, if set, authenticates the agent to a control plane that requires bearer
	// tokens: it is the bootstrap token (e.g. jwtkeys.NewFileTokenSource of a
	// projected token file, re-read on every call). The agent presents the newest
	// token the control plane handed it over its stream (registered reply, heartbeat
	// acknowledgements) while that one is valid, and falls back on Token otherwise
	// or after the control plane refused it. Nil presents no token.
	Token jwtkeys.TokenSource

	// Logger receives connection events and the "agent TLS CA bundle reload failed"
	// line (default: discard).
	Logger *slog.Logger
	// Registerer receives the hotcert_agent_* metrics and the hotcert_tls_* metrics
	// of the bundle and client certificate. Nil registers nothing (Stats still
	// counts): a process with many agents gives each its own registry, or none.
	Registerer prometheus.Registerer
	// MetricsOptions rename the hotcert_tls_* metrics.
	MetricsOptions []metrics.Option
	// ReloaderOptions are added to the options of the bundle's and the client
	// certificate's reloaders (hotcert.WithSettle, hotcert.WithPollInterval, ...).
	ReloaderOptions []hotcert.Option
	// Watch also follows the files between connections (directory watch plus poll),
	// so metrics and logs reflect a change before the next reconnect. Each watching
	// agent holds an inotify instance. Without it the files are read on every
	// connection only (which is what decides what a connection trusts), and before
	// each heartbeat's trust report to the control plane; a file that does not load
	// is reported at that read (no settle window).
	Watch bool

	// HeartbeatInterval is how often the agent heartbeats on its stream (default
	// 10s).
	HeartbeatInterval time.Duration
	// HeartbeatTimeout is how long a stream may receive nothing (no heartbeat
	// acknowledgement, no work) before the agent drops it and reconnects (default
	// three heartbeat intervals), provided the control plane also left the
	// heartbeats sent meanwhile unanswered (as many as fit in the timeout): a pause
	// of the agent's own process (a CPU-starved machine) is not the control plane's
	// silence.
	HeartbeatTimeout time.Duration
	// ConnectTimeout bounds opening a stream: TCP connect, TLS handshake, register
	// (default 10s). A failing handshake fails at once; this only bounds a hang.
	ConnectTimeout time.Duration
	// MinBackoff and MaxBackoff bound the jittered exponential backoff between
	// failed connection attempts (defaults 1s and 30s).
	MinBackoff, MaxBackoff time.Duration
	// ReconnectJitter is the upper bound of the random delay before reconnecting
	// after an established stream dropped, so that agents of a restarted replica do
	// not reconnect as one herd (default 1s).
	ReconnectJitter time.Duration
	// OnEvent, if set, is called synchronously for every connection, failure, drop
	// and work item. It must be fast and safe for concurrent use.
	// ReconnectOnCertChange, with a client certificate, re-handshakes after the
	// certificate rotates, at a random time within this window, so the server sees
	// the new certificate without waiting for the next drop (0: keep the connection).
	ReconnectOnCertChange time.Duration
	// ReconnectBeforeExpiry, if positive, re-handshakes this long before the first
	// of the connection's certificates expires (its client certificate chain, the
	// server chain it verified), at a random time within ReconnectOnCertChange
	// before that, so that no stream runs on expired credentials (0: keep the
	// connection).
	ReconnectBeforeExpiry time.Duration
	// ExpiryClock is the clock ReconnectBeforeExpiry waits on (default: the wall
	// clock).
	ExpiryClock hotcert.Clock
	OnEvent     func(Event)

	// TrustGuard keeps trusting the CA that issued the leaf the control plane served
	// at the last handshake after the bundle drops it, until the control plane
	// serves a leaf from a CA the bundle keeps, for at most TrustGuardMax, logged
	// when it starts and ends. A CA listed in RevokedCAs is never kept.
	TrustGuard bool
	// TrustGuardMax bounds how long a removed CA stays trusted (default
	// DefaultTrustGuardMax), counted from the read that first lacked it.
	TrustGuardMax time.Duration
	// DenyList, if set, refuses a control plane whose certificate it revokes
	// (package revocation: serials per issuer, SPKI hashes, CRLs checked against the
	// CA bundle), at every handshake, and drops the connection when a new list
	// revokes the certificate it was opened with. It is read like the CA bundle
	// (on every dial, or watched with Watch); its version is in the agent's reports.
	DenyList revocation.Source
	// StaleCRLPolicy is what a CRL of DenyList does once its NextUpdate passes.
	StaleCRLPolicy revocation.StalePolicy
	// RevokedCAs are CAs (SHA-256 fingerprints) the trust guard never keeps.
	RevokedCAs []hotcert.Fingerprint
	// Clock is what TrustGuardMax is judged by (default time.Now).
	Clock func() time.Time
}

// CheckServerAddress reports whether addr is a control-plane address an agent can
// dial: host:port with a port. Without one the agent would retry forever.
func CheckServerAddress(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return fmt.Errorf("%q: want host:port, e.g. %s:9091", addr, strings.Trim(addr, "[]:"))
	}
	return nil
}

func (c *Config) setDefaults() error {
	switch {
	case c.Server == "":
		return errors.New("agent: Config.Server (the control plane address) is required")
	case c.CAFile == "":
		return errors.New("agent: Config.CAFile (the CA bundle) is required")
	case (c.CertFile == "") != (c.KeyFile == ""):
		return errors.New("agent: a client certificate needs both CertFile and KeyFile")
	case CheckServerAddress(c.Server) != nil:
		return fmt.Errorf("agent: Config.Server %w", CheckServerAddress(c.Server))
	case c.TrustGuardMax < 0:
		return errors.New("agent: the trust guard's maximum must not be negative")
	case c.HeartbeatInterval < 0 || c.HeartbeatTimeout < 0 || c.ConnectTimeout < 0 || c.MinBackoff < 0 || c.MaxBackoff < 0 || c.ReconnectJitter < 0 || c.ReconnectBeforeExpiry < 0:
		return errors.New("agent: durations must not be negative")
	}
	if c.ID == "" {
		host, _ := os.Hostname()
		var b [3]byte
		_, _ = rand.Read(b[:])
		c.ID = host + "-" + hex.EncodeToString(b[:])
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.HeartbeatInterval, 10*time.Second)
	def(&c.HeartbeatTimeout, 3*c.HeartbeatInterval)
	def(&c.ConnectTimeout, 10*time.Second)
	def(&c.MinBackoff, time.Second)
	def(&c.MaxBackoff, 30*time.Second)
	def(&c.ReconnectJitter, time.Second)
	def(&c.TrustGuardMax, DefaultTrustGuardMax)
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.MaxBackoff < c.MinBackoff {
		c.MaxBackoff = c.MinBackoff
	}
	return nil
}
