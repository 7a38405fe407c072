package proxy

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Allow authorizes a verified peer by the identities its leaf certificate names. A
// peer is allowed when any of its SANs matches any entry; an Allow with no entry
// allows every peer whose chain verified. Matching is exact (case-insensitive for
// DNS names); a SPIFFE ID without a path ("spiffe://example.org") allows every ID of
// that trust domain.
type Allow struct {
	DNSNames  []string
	URIs      []string
	SPIFFEIDs []string
}

// Empty reports whether a allows every verified peer.
func (a Allow) Empty() bool { return len(a.DNSNames)+len(a.URIs)+len(a.SPIFFEIDs) == 0 }

// check validates the SPIFFE IDs of the list.
func (a Allow) check() error {
	for _, id := range a.SPIFFEIDs {
		if !strings.HasPrefix(id, "spiffe://") || len(id) == len("spiffe://") {
			return fmt.Errorf("proxy: allowed SPIFFE ID %q: want spiffe://trust-domain[/path]", id)
		}
	}
	return nil
}

// ErrNotAllowed is wrapped by the handshake error of a peer the allow list refuses.
var ErrNotAllowed = errors.New("peer not allowed")

// Allowed reports whether leaf's SANs match the list.
func (a Allow) Allowed(leaf *x509.Certificate) bool {
	if a.Empty() {
		return true
	}
	for _, n := range leaf.DNSNames {
		if slices.ContainsFunc(a.DNSNames, func(w string) bool { return strings.EqualFold(w, n) }) {
			return true
		}
	}
	for _, u := range leaf.URIs {
		s := u.String()
		if slices.Contains(a.URIs, s) {
			return true
		}
		if u.Scheme != "spiffe" {
			continue
		}
		for _, id := range a.SPIFFEIDs {
			if id == s || id == "spiffe://"+u.Host || id == "spiffe://"+u.Host+"/" {
				return true
			}
		}
	}
	return false
}

// verify is a tls.Config VerifyConnection that runs after hotcert's chain checks:
// full and resumed handshakes alike are refused for a peer outside the list.
func (a Allow) verify(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return nil // no client certificate requested: nothing to authorize
	}
	leaf := cs.PeerCertificates[0]
	if a.Allowed(leaf) {
		return nil
	}
	return fmt.Errorf("proxy: %w: %s (DNS %v, URI %v) matches no allowed identity", ErrNotAllowed, leaf.Subject, leaf.DNSNames, leaf.URIs)
}
