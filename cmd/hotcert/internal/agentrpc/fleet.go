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
	// ClientCert is the client certificate it presents (mTLS only).
	ClientCert *hotcert.CertificateSummary `json:"client_cert,omitempty"`
	// ReportedAt is when it last reported (nil: never).
	ReportedAt *time.Time `json:"reported_at,omitempty"`
}
