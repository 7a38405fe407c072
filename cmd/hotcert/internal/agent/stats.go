package agent

import (
	"crypto/x509"
	"encoding/json"
	"maps"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/inspect"
)

// EventKind says what happened.
type EventKind string

// Events reported to Config.OnEvent.
const (
	EventConnected       EventKind = "connected"        // a stream is registered (Replica, Peer)
	EventConnectFailed   EventKind = "connect_failed"   // an attempt to open a stream failed (Reason, Err)
	EventHandshakeFailed EventKind = "handshake_failed" // a TLS handshake failed (Reason, Err)
	EventStreamDropped   EventKind = "stream_dropped"   // an established stream ended (Uptime, Err)
	EventWork            EventKind = "work"             // a work item arrived (Seq, Payload)
)

// Event is one connection event of an Agent.
type Event struct {
	Kind    EventKind
	AgentID string
	Time    time.Time
	// Replica is the control plane replica of the stream.
	Replica string
	// Peer is the server certificate the stream's connection was opened with.
	Peer *x509.Certificate
	// Reason classifies a failure (agentrpc.Reason* values: unknown_authority,
	// hostname, expired, peer_rejected, unreachable, timeout, unauthenticated, ...).
	Reason string
	Err    error
	// Uptime is how long a dropped stream was up.
	Uptime time.Duration
	// Seq and Payload describe a work item.
	Seq     uint64
	Payload string
}

// Stats is a point-in-time view of an Agent's counters.
type Stats struct {
	Connected bool   `json:"connected"`
	Replica   string `json:"replica,omitempty"`
	// Server describes the certificate of the current stream's connection.
	Server       *inspect.Certificate `json:"server,omitempty"`
	StreamUptime time.Duration        `json:"stream_uptime_ns"`

	Connects                  uint64            `json:"connects"`
	ConnectFailures           uint64            `json:"connect_failures"`
	ConnectFailuresByReason   map[string]uint64 `json:"connect_failures_by_reason,omitempty"`
	Handshakes                uint64            `json:"tls_handshakes"`
	HandshakeFailures         uint64            `json:"tls_handshake_failures"`
	HandshakeFailuresByReason map[string]uint64 `json:"tls_handshake_failures_by_reason,omitempty"`
	StreamDrops               uint64            `json:"stream_drops"`
	HeartbeatsAcked           uint64            `json:"heartbeats_acked"`
	WorkItems                 uint64            `json:"work_items"`
	// TokensReceived counts the tokens the control plane handed over; TokenKeyID and
	// TokenExpires describe the newest (the kid it was signed with, never the token).
	TokensReceived uint64     `json:"tokens_received,omitempty"`
	TokenKeyID     string     `json:"token_kid,omitempty"`
	TokenExpires   *time.Time `json:"token_expires,omitempty"`
}

// Stats returns the agent's counters.
func (a *Agent) Stats() Stats { return a.c.snapshot() }

// ServerFingerprint returns the SHA-256 of the server certificate of the current
// stream, and false while not connected.
func (a *Agent) ServerFingerprint() (hotcert.Fingerprint, bool) {
	a.c.mu.Lock()
	defer a.c.mu.Unlock()
	if a.c.stream == nil || a.c.stream.peer == nil {
		return hotcert.Fingerprint{}, false
	}
	return hotcert.FingerprintOf(a.c.stream.peer), true
}

type streamInfo struct {
	replica string
	peer    *x509.Certificate
	chain   []*x509.Certificate // the control plane's verified chain
	since   time.Time
}

type counters struct {
	connects, connectFails, handshakes, handshakeFails, drops, acks, work, tokens atomic.Uint64

	mu               sync.Mutex
	stream           *streamInfo // nil while not connected
	connectReasons   map[string]uint64
	handshakeReasons map[string]uint64
	lastHSReason     string
	tokenKid         string
	tokenExp         time.Time
}

func (c *counters) init() {
	c.connectReasons = make(map[string]uint64)
	c.handshakeReasons = make(map[string]uint64)
}

func (c *counters) connected(s streamInfo) {
	c.connects.Add(1)
	c.mu.Lock()
	c.stream = &s
	c.mu.Unlock()
}

// streamChain is the control plane's verified chain of the open stream (nil
// while none is open).
func (c *counters) streamChain() []*x509.Certificate {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stream == nil {
		return nil
	}
	return c.stream.chain
}

// disconnected ends the current stream, counting a drop unless the agent is
// stopping, and returns how long it was up.
func (c *counters) disconnected(drop bool) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var up time.Duration
	if c.stream != nil {
		up = time.Since(c.stream.since)
	}
	c.stream = nil
	if drop {
		c.drops.Add(1)
	}
	return up
}

func (c *counters) connectFailed(reason string) {
	c.connectFails.Add(1)
	c.mu.Lock()
	c.connectReasons[reason]++
	c.mu.Unlock()
}

func (c *counters) handshakeFailed(reason string) {
	c.mu.Lock()
	c.handshakeReasons[reason]++
	c.lastHSReason = reason
	c.mu.Unlock()
	c.handshakeFails.Add(1) // after lastHSReason: session reads them in this order
}

// tokenReceived records the kid and expiry of a token the control plane handed over.
// They are read without verifying the token: for status, never for trust.
func (c *counters) tokenReceived(tok string) {
	var claims jwt.RegisteredClaims
	t, _, err := jwt.NewParser().ParseUnverified(tok, &claims)
	kid := ""
	var exp time.Time
	if err == nil {
		kid, _ = t.Header["kid"].(string)
		if claims.ExpiresAt != nil {
			exp = claims.ExpiresAt.Time
		}
	}
	c.tokens.Add(1)
	c.mu.Lock()
	c.tokenKid, c.tokenExp = kid, exp
	c.mu.Unlock()
}

func (c *counters) lastHandshakeReason() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastHSReason
}

func (c *counters) snapshot() Stats {
	st := Stats{
		Connects: c.connects.Load(), ConnectFailures: c.connectFails.Load(),
		Handshakes: c.handshakes.Load(), HandshakeFailures: c.handshakeFails.Load(),
		StreamDrops: c.drops.Load(), HeartbeatsAcked: c.acks.Load(), WorkItems: c.work.Load(),
		TokensReceived: c.tokens.Load(),
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st.TokenKeyID = c.tokenKid
	if !c.tokenExp.IsZero() {
		exp := c.tokenExp.UTC()
		st.TokenExpires = &exp
	}
	st.ConnectFailuresByReason = maps.Clone(c.connectReasons)
	st.HandshakeFailuresByReason = maps.Clone(c.handshakeReasons)
	if s := c.stream; s != nil {
		st.Connected, st.Replica, st.StreamUptime = true, s.replica, time.Since(s.since)
		if s.peer != nil {
			d := inspect.Describe(s.peer)
			st.Server = &d
		}
	}
	return st
}

// Status is what the agent's /healthz reports.
type Status struct {
	Agent  string `json:"agent"`
	Server string `json:"server"`
	Stats  Stats  `json:"stats"`
	// CABundle lists the CAs the next connection trusts.
	CABundle []inspect.Certificate `json:"ca_bundle"`
	CASource string                `json:"ca_source"`
	// CALastError is the last bundle reload failure (the last good bundle is in use).
	CALastError      string `json:"ca_last_error,omitempty"`
	CAReloadFailures uint64 `json:"ca_reload_failures"`
	// Held says what the agent holds: the bundle (every CA's fingerprint and
	// subject, generation, loaded-at) and its client certificate (mTLS only).
	Held       hotcert.Summary  `json:"held"`
	ClientCert *hotcert.Summary `json:"client_cert,omitempty"`
}

// Status returns the agent's status.
func (a *Agent) Status() Status {
	rs := a.ca.Status()
	st := Status{
		Agent: a.cfg.ID, Server: a.cfg.Server, Stats: a.Stats(),
		CABundle: inspect.DescribeAll(rs.Current.TrustCertificates()), CASource: rs.Current.Source(),
		CAReloadFailures: rs.Failures,
	}
	if rs.LastError != nil {
		st.CALastError = rs.LastError.Error()
	}
	st.Held = rs.Current.Summary()
	if a.identity != nil {
		cs := a.identity.Current().Summary()
		st.ClientCert = &cs
	}
	return st
}

// HealthHandler serves Status as JSON, always with 200: a disconnected agent is
// reconnecting on its own, and restarting it would not help.
func (a *Agent) HealthHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(a.Status())
	})
}
