package hotcert

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"strings"
	"time"
)

// Fingerprint is the SHA-256 of a certificate's DER encoding.
type Fingerprint [32]byte

// FingerprintOf returns the SHA-256 fingerprint of c.
func FingerprintOf(c *x509.Certificate) Fingerprint { return sha256.Sum256(c.Raw) }

// String returns the fingerprint as lower-case hex without separators, the form
// `openssl x509 -fingerprint -sha256` prints once colons are removed and case folded.
func (f Fingerprint) String() string { return hex.EncodeToString(f[:]) }

// Colon returns the fingerprint as upper-case hex pairs separated by colons, exactly
// as openssl prints it.
func (f Fingerprint) Colon() string {
	s := strings.ToUpper(hex.EncodeToString(f[:]))
	var b strings.Builder
	for i := 0; i < len(s); i += 2 {
		if i > 0 {
			b.WriteByte(':')
		}
		b.WriteString(s[i : i+2])
	}
	return b.String()
}

// Material is an immutable, validated snapshot of TLS material: an identity (leaf,
// intermediates and private key, leaf pre-parsed) and/or a trust bundle (every CA,
// as a pool and as a list), with fingerprints, validity and provenance.
//
// Material is never modified after [Validate] returns it; values it returns (the
// certificate, the pool, slices) are shared and must not be modified by callers.
// Every accessor is safe on a nil *Material (an empty Store) and returns zero values.
type Material struct {
	cert       *tls.Certificate
	chain      []*x509.Certificate
	leafFP     Fingerprint
	trustPool  *x509.CertPool
	trustCerts []*x509.Certificate
	trustFPs   []Fingerprint

	contentHash [32]byte
	source      string
	generation  uint64
	loadedAt    time.Time
}

// HasIdentity reports whether the material holds a certificate and private key.
func (m *Material) HasIdentity() bool { return m != nil && m.cert != nil }

// HasTrust reports whether the material holds a trust bundle.
func (m *Material) HasTrust() bool { return m != nil && len(m.trustCerts) > 0 }

// Certificate returns the identity as a tls.Certificate with Leaf set, or nil.
func (m *Material) Certificate() *tls.Certificate {
	if m == nil {
		return nil
	}
	return m.cert
}

// Leaf returns the parsed leaf certificate, or nil.
func (m *Material) Leaf() *x509.Certificate {
	if m == nil || m.cert == nil {
		return nil
	}
	return m.cert.Leaf
}

// Chain returns the parsed certificate chain, leaf first, or nil.
func (m *Material) Chain() []*x509.Certificate {
	if m == nil {
		return nil
	}
	return m.chain
}

// LeafFingerprint returns the SHA-256 fingerprint of the leaf (zero without identity).
func (m *Material) LeafFingerprint() Fingerprint {
	if m == nil {
		return Fingerprint{}
	}
	return m.leafFP
}

// TrustPool returns the trust bundle as a pool, or nil without trust.
func (m *Material) TrustPool() *x509.CertPool {
	if m == nil {
		return nil
	}
	return m.trustPool
}

// TrustCertificates returns every CA of the trust bundle, in bundle order.
func (m *Material) TrustCertificates() []*x509.Certificate {
	if m == nil {
		return nil
	}
	return m.trustCerts
}

// TrustFingerprints returns the SHA-256 fingerprints of the bundle's CAs, in order.
func (m *Material) TrustFingerprints() []Fingerprint {
	if m == nil {
		return nil
	}
	return m.trustFPs
}

// NotBefore returns the leaf's NotBefore, or the zero time without identity.
func (m *Material) NotBefore() time.Time {
	if l := m.Leaf(); l != nil {
		return l.NotBefore
	}
	return time.Time{}
}

// NotAfter returns the time the material stops being usable: the leaf's NotAfter
// when there is an identity, otherwise the earliest NotAfter among the trust bundle's
// CAs.
func (m *Material) NotAfter() time.Time {
	if l := m.Leaf(); l != nil {
		return l.NotAfter
	}
	var t time.Time
	for _, c := range m.TrustCertificates() {
		if t.IsZero() || c.NotAfter.Before(t) {
			t = c.NotAfter
		}
	}
	return t
}

// ContentHash returns the SHA-256 of the content the material was built from
// ([Content.Hash]).
func (m *Material) ContentHash() [32]byte {
	if m == nil {
		return [32]byte{}
	}
	return m.contentHash
}

// Source describes where the material was read from.
func (m *Material) Source() string {
	if m == nil {
		return ""
	}
	return m.source
}

// Generation counts the materials a [Store] has published: 1 for the first, 2 after
// the first reload, and so on. It is 0 for Material not published by a Reloader.
func (m *Material) Generation() uint64 {
	if m == nil {
		return 0
	}
	return m.generation
}

// LoadedAt returns when the material was validated.
func (m *Material) LoadedAt() time.Time {
	if m == nil {
		return time.Time{}
	}
	return m.loadedAt
}

// withGeneration returns a shallow copy of m with the given generation; the original
// stays untouched so that Material remains immutable once shared.
func (m *Material) withGeneration(g uint64) *Material {
	c := *m
	c.generation = g
	return &c
}
