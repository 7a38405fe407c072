package hotcert

import "slices"

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
