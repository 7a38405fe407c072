package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	"github.com/hotcert/hotcert"
)

// Extended key usages checked for each side; never modified.
var (
	serverAuth = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	clientAuth = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
)

// verifyChain verifies a peer's certificate chain exactly as crypto/tls does
// (handshake_client.go verifyServerCertificate, handshake_server.go
// processCertsFromClient): the peer's other certificates are intermediates, name is
// the DNS name or IP address the leaf must match ("" skips the name check, as for a
// client certificate), usages the required extended key usages, now the time
// (zero: time.Now). The error wraps the x509 error in a tls.CertificateVerificationError,
// as crypto/tls returns it.
func verifyChain(certs []*x509.Certificate, roots *x509.CertPool, name string, usages []x509.ExtKeyUsage, now time.Time) ([][]*x509.Certificate, error) {
	if len(certs) == 0 {
		return nil, errors.New("tlsconfig: peer presented no certificate")
	}
	if roots == nil {
		return nil, errors.New("tlsconfig: no CA bundle to verify the peer certificate against")
	}
	opts := x509.VerifyOptions{Roots: roots, CurrentTime: now, DNSName: name, KeyUsages: usages}
	chains, err := hotcert.VerifyChain(certs, opts)
	if err != nil {
		return nil, &tls.CertificateVerificationError{UnverifiedCertificates: certs, Err: err}
	}
	return chains, nil
}

// resumptionCheck re-verifies the peer of a resumed session against the trust of
// the config it is attached to. Full handshakes return at once: crypto/tls has
// just verified them against the same pool. A resumed session carries the peer
// chain of the handshake that created it, possibly under a CA that is gone since
// (cf. CVE-2025-68121, golang/go#77217); Go 1.26 already skips such sessions, and
// this check makes sure of it whatever the standard library does.
//
// It also refuses, on every handshake, full and resumed, a peer the deny list
// (WithDenyList) names.
type resumptionCheck struct {
	roots  *x509.CertPool
	usages []x509.ExtKeyUsage
	time   func() time.Time
	deny   DenyList
	next   func(tls.ConnectionState) error
}

func (r *resumptionCheck) verify(cs tls.ConnectionState) error {
	chains := cs.VerifiedChains
	if cs.DidResume && len(cs.PeerCertificates) > 0 {
		var err error
		if chains, err = verifyChain(cs.PeerCertificates, r.roots, "", r.usages, now(r.time)); err != nil {
			return fmt.Errorf("tlsconfig: resumed session refused, its peer no longer verifies against the current CA bundle: %w", err)
		}
	}
	if err := checkDenied(r.deny, chains, cs.DidResume); err != nil {
		return err
	}
	if r.next != nil {
		return r.next(cs)
	}
	return nil
}

func now(f func() time.Time) time.Time {
	if f != nil {
		return f()
	}
	return time.Time{} // x509 then uses time.Now
}
