package hotcert

import (
	"crypto/x509"
	"errors"
	"slices"
)

// SameIdentity reports whether m and o serve the same certificate: both hold an
// identity with the same leaf (SHA-256 of its DER), or neither holds one. A change
// of the trust bundle alone leaves the identity the same. Either may be nil (no
// identity).
func (m *Material) SameIdentity(o *Material) bool {
	if m.HasIdentity() != o.HasIdentity() {
		return false
	}
	return !m.HasIdentity() || m.LeafFingerprint() == o.LeafFingerprint()
}

// SameTrust reports whether m and o trust the same CAs: the same certificates in
// the same order, or no bundle in either. Either may be nil (no bundle).
func (m *Material) SameTrust(o *Material) bool {
	return slices.Equal(m.TrustFingerprints(), o.TrustFingerprints())
}

// VerifyChain verifies chain[0] the way crypto/tls verifies a peer: the rest of the
// chain serves as intermediates (added to a copy of opts.Intermediates, if any), and
// every other setting (roots, time, name, key usages) comes from opts. It returns
// the verified chains, as x509.Certificate.Verify does.
func VerifyChain(chain []*x509.Certificate, opts x509.VerifyOptions) ([][]*x509.Certificate, error) {
	if len(chain) == 0 {
		return nil, errors.New("hotcert: no certificate to verify")
	}
	if opts.Intermediates == nil {
		opts.Intermediates = x509.NewCertPool()
	} else {
		opts.Intermediates = opts.Intermediates.Clone()
	}
	for _, c := range chain[1:] {
		opts.Intermediates.AddCert(c)
	}
	return chain[0].Verify(opts)
}
