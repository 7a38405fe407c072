package agentrpc

import (
	"time"

	"github.com/hotcert/hotcert"
)

// The fleet view is the "fleet" object of a control plane replica's status
// (/healthz): what its connected agents trust, from their TrustReports. The
// control plane builds it and `hotcert rotation` reads it, so its JSON is a
// contract (docs/rotation.md) and lives here, beside the reports it is built from.

// How a connected agent reads its trust bundle (FleetAgent.TrustReading).
const (
	// TrustPerConnect: the agent re-reads its bundle before every connection.
	TrustPerConnect = "per_connect"
	// TrustAtStart: the agent reported its bundle, which it reads only at start.
	TrustAtStart = "at_start"
	// TrustUnknown: the agent reported nothing — an agent of an older release, which
	// reads its bundle only at start.
	TrustUnknown = "unknown"
)

// Fleet is one control plane replica's view of what its connected agents trust,
// from the reports they send with register and heartbeat messages.
type Fleet struct {
	// Agents counts the connected agent streams.
	Agents int `json:"agents"`
	// ByTrustReading counts them by how they read their bundle (TrustPerConnect,
	// TrustAtStart, TrustUnknown).
	ByTrustReading map[string]int `json:"by_trust_reading"`
	// CAs counts, per CA fingerprint, the connected agents whose bundle holds it.
	CAs []FleetCA `json:"cas"`
	// AgentList says, per connected agent, what it trusts.
	AgentList []FleetAgent `json:"agent_list"`

	// RememberSeconds is how long the replica keeps an agent whose stream closed in
	// DepartedList (0: it keeps none; absent from replicas of older releases).
	RememberSeconds float64 `json:"departed_remember_seconds"`
	// Departed counts the agents of DepartedList.
	Departed int `json:"departed"`
	// DepartedList says, per agent whose stream closed less than RememberSeconds ago
	// and that has not come back to this replica, when it was last seen and what it
	// last reported. It is not counted in Agents, ByTrustReading or CAs: those are
	// the connected agents. `hotcert rotation` counts a departed agent as not proven
	// until it is back (on any replica) or the replica forgets it.
	DepartedList []DepartedAgent `json:"departed_list"`
}

// DepartedAgent is an agent whose stream closed: what it last reported, when its
// stream closed and until when the replica keeps it.
type DepartedAgent struct {
	FleetAgent
	// LastSeen is when its stream closed.
	LastSeen time.Time `json:"last_seen"`
	// ForgetAt is when the replica stops listing it (LastSeen + RememberSeconds).
	ForgetAt time.Time `json:"forget_at"`
}

// FleetCA is one CA and how many connected agents trust it.
type FleetCA struct {
	// SHA256 is the CA's fingerprint, lower-case hex.
	SHA256  string `json:"sha256"`
	Subject string `json:"subject"`
	Agents  int    `json:"agents"`
}

// FleetAgent is what one connected agent last reported.
type FleetAgent struct {
	ID     string    `json:"id"`
	Remote string    `json:"remote"`
	Since  time.Time `json:"since"`
	// TrustReading is TrustPerConnect, TrustAtStart or TrustUnknown (then CAs is
	// empty: nothing is known of its bundle).
	TrustReading string `json:"trust_reading"`
	// CAs are the fingerprints (lower-case hex) of the CAs its bundle holds.
	CAs []string `json:"cas,omitempty"`
	// PeerSerial is the serial (openssl's format) of the client certificate its
	// connection's handshake verified: what the replica saw, not what the agent says
	// (mTLS only).
	PeerSerial string `json:"peer_serial,omitempty"`
	// DenyListVersion is the version of the deny list the agent enforces on the
	// servers it connects to, as it reported it (empty: none, or an older release).
	DenyListVersion string `json:"deny_list_version,omitempty"`
	// ClientCert is the client certificate it presents (mTLS only).
	ClientCert *hotcert.CertificateSummary `json:"client_cert,omitempty"`
	// ReportedAt is when it last reported (nil: never).
	ReportedAt *time.Time `json:"reported_at,omitempty"`
}
