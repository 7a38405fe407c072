package agentrpc

import (
	"crypto/x509"
	"fmt"
	"iter"
	"math/big"
	"strings"
	"time"

	"github.com/hotcert/hotcert"
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

// NewDenyListStatus describes the list r enforces, with what peers (the verified
// chains of the open connections, leaf first) say about it, and answers for
// serial (hex, colons allowed) when it is not "" — of issuer (the issuing CA's
// SHA-256) when that is not "" too. Every process that enforces a
// deny list (the control plane, hotcert proxy) reports it with this, so that
// `hotcert rotation status --revoked-serial` reads them all alike.
func NewDenyListStatus(r *revocation.Reloader, serial, issuer string, peers iter.Seq[[]*x509.Certificate]) (*DenyListStatus, error) {
	rs := r.Status()
	l := rs.Current
	st := &DenyListStatus{Info: l.Info(), Policy: r.Policy().String(), ReloadFailures: rs.Failures}
	if rs.LastError != nil {
		at := rs.LastErrorAt.UTC()
		st.LastError, st.LastErrorAt = rs.LastError.Error(), &at
	}
	var want *big.Int
	var wantIssuer hotcert.Fingerprint
	if serial != "" {
		n, ok := new(big.Int).SetString(strings.ReplaceAll(serial, ":", ""), 16)
		if !ok {
			return nil, fmt.Errorf("revoked_serial %q is not a hex serial", serial)
		}
		want = n
		st.Serial = &SerialStatus{Serial: hotcert.FormatSerial(n), Revoked: l.Revokes(n)}
		if issuer != "" {
			fp, err := hotcert.ParseFingerprint(issuer)
			if err != nil {
				return nil, fmt.Errorf("revoked_issuer: %w", err)
			}
			wantIssuer = fp
			st.Serial.Issuer, st.Serial.Revoked = wantIssuer.String(), l.RevokesSerialOf(wantIssuer, n)
		}
	}
	for chain := range peers {
		st.Connections++
		if l.Check(chain) != nil {
			st.DeniedConnections++
		}
		if want != nil && chain[0].SerialNumber.Cmp(want) == 0 &&
			(st.Serial.Issuer == "" || len(chain) > 1 && hotcert.FingerprintOf(chain[1]) == wantIssuer) {
			st.Serial.Connections++
		}
	}
	return st, nil
}

// DeniedConnections counts the chains of peers (the verified chains of the open
// connections, leaf first) that l denies: the value of
// hotcert_tls_deny_list_denied_connections, which the census reads to prove that
// no connection of a revoked certificate is left.
func DeniedConnections(l *revocation.List, peers iter.Seq[[]*x509.Certificate]) int {
	n := 0
	for chain := range peers {
		if l.Check(chain) != nil {
			n++
		}
	}
	return n
}
