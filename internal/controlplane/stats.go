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
	// Reason says why a stream closed, or classifies a handshake failure
	// (agentrpc.Reason* values, e.g. "peer_rejected" when the agent refused the
	// certificate).
	Reason string
	// Err is the handshake error.
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
}

// Stats returns the server's counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	st := Stats{ConnectedAgents: len(s.sessions), FailuresByReason: maps.Clone(s.failures)}
	s.mu.Unlock()
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
