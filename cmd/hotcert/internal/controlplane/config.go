package controlplane

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/drain"
	"github.com/hotcert/hotcert/jwtkeys"
	"github.com/hotcert/hotcert/metrics"
	"github.com/hotcert/hotcert/revocation"
)

// DefaultTokenTTL is the lifetime of the tokens a server hands its agents when
// Config.TokenTTL is not set (shortened to the key set's maximum token lifetime).
const DefaultTokenTTL = 15 * time.Minute

// DefaultComponent is the component (metrics label, log attribute) of the server
// certificate: the agent-facing gRPC listener.
const DefaultComponent = "agent_grpc"

// Config configures a Server. TLS is required; every other field has a default.
type Config struct {
	// TLS is where the server certificate and key come from, e.g.
	// file.New(file.WithKeyPair(crt, key)) or kube.NewSecret(client, ns, name).
	// New loads it once and fails on a missing or invalid certificate; Serve follows it.
	TLS hotcert.Source
	// ClientCA, if set, makes the server require client certificates (mTLS) that
	// chain to this CA bundle, re-read like the certificate (component
	// Component+"_client_ca").
	ClientCA hotcert.Source

	// Component names the certificate in metrics and log lines (default "agent_grpc").
	Component string
	// ComponentKey is the log attribute that carries Component on every line, the
	// reloaders' and the server's own (default "component"). Give it the name of the
	// metrics' component label (metrics.WithComponentLabel), e.g. "listener".
	ComponentKey string
	// Replica names this server for agents and logs (default "controlplane").
	Replica string
	// Logger receives the reload lines and stream events (default: discard).
	Logger *slog.Logger
	// Registerer receives the hotcert_tls_* metrics of the certificate and client CA
	// and the hotcert_controlplane_* server metrics. Give each Server its own registry
	// when several live in one process. Nil registers nothing.
	Registerer prometheus.Registerer
	// MetricsOptions rename the hotcert_tls_* metrics (metrics.WithPrefix, ...).
	MetricsOptions []metrics.Option
	// ReloaderOptions are added to the reloaders' options, e.g. hotcert.WithSettle,
	// hotcert.WithPollInterval, hotcert.WithLogAttrs.
	ReloaderOptions []hotcert.Option

	// MaxConnectionAge, if positive, closes each connection after about this long
	// (+/-10% jitter, by GOAWAY), so agents reconnect and see the current certificate.
	MaxConnectionAge time.Duration
	// DrainWindow, if positive, moves agents onto a rotated certificate gracefully:
	// each connection opened under the previous certificate gets a GOAWAY at a random
	// time within the window (N agents reconnect at about N/window per second), its
	// stream ends cleanly and the agent re-opens it at once (see package drain).
	DrainWindow time.Duration
	// CutUntrusted, with ClientCA, drains at once the connections whose client
	// certificate no longer verifies against a changed client CA bundle (its CA was
	// removed, or it expired), with a log line naming the peer.
	CutUntrusted bool
	// DenyList, with ClientCA, refuses agents whose client certificate it revokes
	// (package revocation: serials per issuer, SPKI hashes, CRLs checked against the
	// client CA bundle) at every handshake, resumptions included, and closes at
	// once the open connections of a certificate it adds, leaving every other
	// connection up. It is re-read like the certificate (component
	// Component+"_deny_list"); a list that does not validate keeps the last good one.
	DenyList revocation.Source
	// StaleCRLPolicy is what a CRL of DenyList does once its NextUpdate passes
	// (default revocation.KeepEnforcing).
	StaleCRLPolicy revocation.StalePolicy
	// DrainBeforeExpiry, if positive, ends each connection this long before the
	// first of the certificates it was authenticated with expires (the agent's
	// client certificate chain, the server chain it was served), at times spread
	// over DrainWindow, so that no stream runs on expired credentials and agents
	// sharing one expiry do not reconnect at once (drain.WithExpiryDrain).
	DrainBeforeExpiry time.Duration
	// ExpiryClock is the clock DrainBeforeExpiry waits on (default: the wall clock).
	ExpiryClock hotcert.Clock
	// DrainGrace bounds how long in-flight RPCs of a drained connection may run
	// (default drain.DefaultGrace).
	DrainGrace time.Duration
	// MaxConnectionAgeGrace is how long streams may outlive MaxConnectionAge before the
	// connection is closed (default: unbounded, streams are never cut).
	MaxConnectionAgeGrace time.Duration
	// HandshakeTimeout bounds each TLS handshake (default 10s).
	HandshakeTimeout time.Duration
	// WorkInterval, if positive, pushes a work item to every agent stream this often.
	WorkInterval time.Duration
	// ShutdownGrace bounds the graceful stop when Serve's context ends (default 5s).
	ShutdownGrace time.Duration
	// Tokens, if set, authenticates agents with bearer JWTs (package jwtkeys): every
	// stream (and unary RPC) must present a token this key set verifies, issued to
	// the agent id the stream registers with (claim "sub"), or it fails with
	// codes.Unauthenticated. The server hands each agent a fresh token, signed by the
	// current key, in its registered reply and in heartbeat acknowledgements (see
	// TokenRenewAfter), so agents always hold a token for their next reconnect. Nil
	// accepts every agent. The caller runs the key set (KeySet.Start, Close): several
	// servers may share one.
	Tokens *jwtkeys.KeySet
	// TokenTTL is the lifetime of the tokens the server issues (default
	// DefaultTokenTTL, at most Tokens.MaxTokenTTL()).
	TokenTTL time.Duration
	// TokenRenewAfter is how old an agent's last token may get before a heartbeat
	// acknowledgement carries a new one (default TokenTTL/3). A heartbeat after the
	// signing key changed always gets a token signed by the new key.
	TokenRenewAfter time.Duration

	// FleetRemember is how long an agent whose stream closed stays in the fleet view
	// (Fleet, /healthz) as departed, with when it was last seen and what it last
	// reported, until it registers again: `hotcert rotation status` counts it as not
	// proven meanwhile, so a fleet emptied for a moment (agents reconnecting after a
	// drain) never reads as done. Default DefaultFleetRemember; negative: forget
	// departed agents at once.
	FleetRemember time.Duration

	// TrustGuard holds a new server certificate back while connected agents that
	// report their trust do not trust its issuer (from the fleet view): the previous
	// leaf keeps serving, a log line and the hotcert_controlplane_trust_guard_* metrics
	// say how many agents lack the issuer, and the new leaf is served as soon as they
	// all trust it, or once the previous leaf is within TrustGuardMargin of its expiry.
	TrustGuard bool
	// TrustGuardMargin is how close to its expiry the previous leaf may come before
	// a held-back leaf is served anyway (default DefaultTrustGuardMargin).
	TrustGuardMargin time.Duration
	// TrustGuardRemember is how long an agent whose stream closed still counts for
	// the trust guard, with its last report (default DefaultTrustGuardRemember): a
	// replica restart empties the fleet only for the moment agents take to reconnect.
	TrustGuardRemember time.Duration
	// TrustGuardInterval is how often a held-back leaf is re-examined besides on
	// every agent report (default DefaultTrustGuardInterval).
	TrustGuardInterval time.Duration
	// Clock is the time the trust guard judges the margin of expiry by, and the
	// departed agents' age (default time.Now).
	Clock func() time.Time

	// OnEvent, if set, is called synchronously for every stream opened and closed,
	// every failed TLS handshake and every refused token. It must be fast and safe
	// for concurrent use.
	OnEvent func(Event)
}

func (c *Config) setDefaults() error {
	if c.TLS == nil {
		return errors.New("controlplane: Config.TLS (the certificate source) is required")
	}
	if c.Component == "" {
		c.Component = DefaultComponent
	}
	if c.ComponentKey == "" {
		c.ComponentKey = "component"
	}
	if c.Replica == "" {
		c.Replica = "controlplane"
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = 10 * time.Second
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = 5 * time.Second
	}
	if c.TrustGuardMargin == 0 {
		c.TrustGuardMargin = DefaultTrustGuardMargin
	}
	if c.TrustGuardRemember == 0 {
		c.TrustGuardRemember = DefaultTrustGuardRemember
	}
	if c.FleetRemember == 0 {
		c.FleetRemember = DefaultFleetRemember
	}
	if c.TrustGuardInterval == 0 {
		c.TrustGuardInterval = DefaultTrustGuardInterval
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.CutUntrusted && c.ClientCA == nil {
		return errors.New("controlplane: cutting untrusted peers needs a client CA bundle (mTLS)")
	}
	if c.DenyList != nil && c.ClientCA == nil {
		return errors.New("controlplane: a deny list needs client certificates to check (mTLS, Config.ClientCA)")
	}
	if c.DrainGrace <= 0 {
		c.DrainGrace = drain.DefaultGrace
	}
	if c.MaxConnectionAge < 0 || c.MaxConnectionAgeGrace < 0 || c.DrainBeforeExpiry < 0 || c.WorkInterval < 0 || c.DrainWindow < 0 || c.TokenTTL < 0 || c.TokenRenewAfter < 0 || c.TrustGuardMargin < 0 || c.TrustGuardRemember < 0 || c.TrustGuardInterval < 0 {
		return errors.New("controlplane: durations must not be negative")
	}
	if c.Tokens != nil {
		if c.TokenTTL == 0 {
			c.TokenTTL = min(DefaultTokenTTL, c.Tokens.MaxTokenTTL())
		}
		if c.TokenTTL > c.Tokens.MaxTokenTTL() {
			return fmt.Errorf("controlplane: token lifetime %s is longer than the key set's maximum token lifetime %s", c.TokenTTL, c.Tokens.MaxTokenTTL())
		}
		if c.TokenRenewAfter == 0 {
			c.TokenRenewAfter = c.TokenTTL / 3
		}
		if c.TokenRenewAfter >= c.TokenTTL {
			return fmt.Errorf("controlplane: tokens must be renewed (after %s) before they expire (%s)", c.TokenRenewAfter, c.TokenTTL)
		}
	}
	return nil
}
