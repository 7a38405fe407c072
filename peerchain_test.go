package hotcert_test

import (
	"crypto/tls"
	"crypto/x509"
	"testing"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
)

// PeerChain prefers the verified chain (with the issuer a serial is matched
// against) to what the peer presented.
func TestPeerChain(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	leaf := ca.MustIssue()
	verified := []*x509.Certificate{leaf.Cert, ca.Cert}
	presented := []*x509.Certificate{leaf.Cert}
	for _, c := range []struct {
		name string
		cs   tls.ConnectionState
		want []*x509.Certificate
	}{
		{"verified", tls.ConnectionState{PeerCertificates: presented, VerifiedChains: [][]*x509.Certificate{verified}}, verified},
		{"not verified", tls.ConnectionState{PeerCertificates: presented}, presented},
		{"none", tls.ConnectionState{}, nil},
	} {
		got := hotcert.PeerChain(c.cs)
		if len(got) != len(c.want) || len(got) > 0 && got[len(got)-1] != c.want[len(c.want)-1] {
			t.Errorf("%s: PeerChain = %d certificates, want %d", c.name, len(got), len(c.want))
		}
	}
}
