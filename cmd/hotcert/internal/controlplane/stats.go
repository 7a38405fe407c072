package controlplane

import (
	"maps"
	"slices"
	"strings"
	"time"
)

// EventKind says what happened.
type EventKind string

// Events reported to Config.OnEvent.
const (
	EventStreamOpened    EventKind = "stream_opened"    // an agent registered
	EventStreamClosed    EventKind = "stream_closed"    // an agent stream ended (Duration, Reason)
	EventHandshakeFailed EventKind = "handshake_failed" // a TLS handshake failed (Reason, Err)
	EventAuthRejected    EventKind = "auth_rejected"    // a token was refused (Reason, Err; AgentID for "subject")
)

// Event is one stream or handshake event of a Server.
type Event struct {
	Kind    EventKind
	Replica string
	Time    time.Time
	// AgentID is the registered agent (stream events).
	AgentID string
	// Remote is the peer address.
	Remote string
	// Duration is how long a closed stream was up.
	Duration time.Duration
	// Reason says why a stream closed, classifies a handshake failure
	// (agentrpc.Reason* values, e.g. "peer_rejected" when the agent refused the
	// certificate), or why a token was refused (a jwtkeys.RejectReason such as "expired" or
	// "unknown_key", AuthReasonMissing or AuthReasonSubject).
	Reason string
	// Err is the handshake error or why the token was refused.
	Err error
}

// AgentInfo describes one connected agent stream.
type AgentInfo struct {
	ID     string    `json:"id"`
	Remote string    `json:"remote"`
	Since  time.Time `json:"since"`
	// ClientSubject and ClientSerial describe the agent's client certificate (mTLS
	// only); the serial is in openssl's format.
	ClientSubject string `json:"client_subject,omitempty"`
	ClientSerial  string `json:"client_serial,omitempty"`
}

// Stats counts what a Server did since New.
type Stats struct {
	ConnectedAgents    int               `json:"connected_agents"`
	StreamsOpened      uint64            `json:"streams_opened"`
	StreamsClosed      uint64            `json:"streams_closed"`
	Handshakes         uint64            `json:"tls_handshakes"`
	HandshakeFailures  uint64            `json:"tls_handshake_failures"`
	FailuresByReason   map[string]uint64 `json:"tls_handshake_failures_by_reason,omitempty"`
	HeartbeatsReceived uint64            `json:"heartbeats_received"`
	WorkItemsSent      uint64            `json:"work_items_sent"`
	// TokensIssued counts tokens handed to agents; TokensRejected the streams and
	// RPCs refused for their token, by reason (Config.Tokens only).
	TokensIssued           uint64            `json:"tokens_issued,omitempty"`
	TokensRejected         uint64            `json:"tokens_rejected,omitempty"`
	TokensRejectedByReason map[string]uint64 `json:"tokens_rejected_by_reason,omitempty"`
}

// Stats returns the server's counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	st := Stats{ConnectedAgents: len(s.sessions), FailuresByReason: maps.Clone(s.failures)}
	if len(s.refused) > 0 {
		st.TokensRejectedByReason = maps.Clone(s.refused)
	}
	s.mu.Unlock()
	st.TokensIssued, st.TokensRejected = s.tokensIssued.Load(), s.authFails.Load()
	st.StreamsOpened, st.StreamsClosed = s.opened.Load(), s.closed.Load()
	st.Handshakes, st.HandshakeFailures = s.handshakes.Load(), s.handshakeFails.Load()
	st.HeartbeatsReceived, st.WorkItemsSent = s.heartbeats.Load(), s.workSent.Load()
	return st
}

// Agents lists the connected agents, sorted by id.
func (s *Server) Agents() []AgentInfo {
	s.mu.Lock()
	out := make([]AgentInfo, 0, len(s.sessions))
	for sess := range s.sessions {
		out = append(out, sess.info)
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b AgentInfo) int { return strings.Compare(a.ID, b.ID) })
	return out
}
