package hotcert

import (
	"crypto/tls"
	"crypto/x509"
)

// PeerChain is the peer's chain as a handshake established it: the first
// verified chain (leaf first, up to the root, so that a serial can be matched
// with the issuer that follows it) when the peer was verified, else the
// certificates it presented (nil for none). A resumed session carries the chain
// of the handshake that issued its ticket.
func PeerChain(cs tls.ConnectionState) []*x509.Certificate {
	if len(cs.VerifiedChains) > 0 {
		return cs.VerifiedChains[0]
	}
	return cs.PeerCertificates
}
