package agentrpc

import (
	"time"

	"github.com/hotcert/hotcert/revocation"
)

// The deny-list status is the "deny_list" object of a control plane replica's
// status (/healthz): the control plane builds it and `hotcert rotation status
// --revoked-serial` reads it, so its JSON is a contract (docs/revocation.md) and
// lives here, beside the fleet view.

// DenyListStatus is the "deny_list" object of /healthz: the version the replica
// enforces and what its open connections say about it.
type DenyListStatus struct {
	revocation.Info
	// Policy is the stale-CRL policy: keep-enforcing or refuse-all.
	Policy string `json:"stale_crl_policy"`
	// DeniedConnections counts open connections whose peer the list in use denies:
	// 0 once the live cut has ended them (the replica's own handshake evidence).
	DeniedConnections int `json:"denied_connections"`
	// Connections counts the open agent connections it looked at.
	Connections int `json:"connections"`
	// Serial answers /healthz?revoked_serial=X.
	Serial *SerialStatus `json:"serial,omitempty"`
	// LastError is the last refused list (the last good one stays), cleared by the next good load.
	LastError      string     `json:"last_error,omitempty"`
	LastErrorAt    *time.Time `json:"last_error_at,omitempty"`
	ReloadFailures uint64     `json:"reload_failures"`
}

// SerialStatus says whether one serial is refused by this replica, and how many
// of its open connections present a certificate with that serial.
type SerialStatus struct {
	Serial string `json:"serial"`
	// Issuer is the issuing CA's SHA-256 asked about (lower-case hex; "": any
	// issuer's serial).
	Issuer      string `json:"issuer,omitempty"`
	Revoked     bool   `json:"revoked"`
	Connections int    `json:"connections"`
}
