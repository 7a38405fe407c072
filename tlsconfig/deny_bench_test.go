//go:build unix

package tlsconfig_test

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/handshakebench"
	"github.com/hotcert/hotcert/revocation"
	"github.com/hotcert/hotcert/tlsconfig"
)

// BenchmarkDenyListHandshake compares the CPU of full mutual-TLS handshakes (TLS
// 1.3, ECDSA P-256, no resumption) of hotcert configs without a deny list and with
// one of 10,000 entries (4,000 serials of the deny list, 2,000 SPKI hashes, a CRL
// of 4,000 serials), enforced at both ends, interleaved in one run: the ratio
// "deny-10k/no-deny-list" is the cost of revocation checking per handshake.
func BenchmarkDenyListHandshake(b *testing.B) {
	ca := hotcerttest.MustNewCA()
	srvLeaf, cliLeaf := ca.MustIssue(), ca.MustIssue(hotcerttest.WithCommonName("agent"))
	base := &tls.Config{MinVersion: tls.VersionTLS13, SessionTicketsDisabled: true}
	srvStore := hotcert.NewStore(materialOf(b, srvLeaf, ca))
	cliStore := hotcert.NewStore(materialOf(b, cliLeaf, ca))

	var list strings.Builder
	issuer := hotcert.FingerprintOf(ca.Cert)
	random := func(n int) []byte {
		p := make([]byte, n)
		_, _ = rand.Read(p)
		return p
	}
	for range 4000 {
		fmt.Fprintf(&list, "serial %s issuer %s\n", hex.EncodeToString(random(16)), issuer)
	}
	for range 2000 {
		fmt.Fprintf(&list, "spki %s\n", hex.EncodeToString(random(32)))
	}
	serials := make([]*big.Int, 4000)
	for i := range serials {
		serials[i] = new(big.Int).SetBytes(random(16))
	}
	now := time.Now()
	crl := ca.MustCRL(1, now.Add(-time.Hour), now.Add(time.Hour), serials...)
	l, err := revocation.Validate(revocation.Content{
		DenyList: hotcert.Input{Name: "deny.list", Data: []byte(list.String())},
		CRLs:     hotcert.Input{Name: "ca.crl", Data: crl},
	}, materialOf(b, srvLeaf, ca), now)
	if err != nil {
		b.Fatal(err)
	}
	if in := l.Info(); in.Serials+in.SPKIs != 10000 {
		b.Fatalf("the list holds %d entries, want 10,000", in.Serials+in.SPKIs)
	}
	deny := &denyHolder{}
	deny.p.Store(l)

	handshakebench.Interleave(b, []handshakebench.Handshaker{
		{Name: "no-deny-list",
			Server: tlsServer(tlsconfig.MTLSServerConfig(srvStore, tlsconfig.WithBase(base))),
			Client: tlsClient(tlsconfig.ClientConfig(cliStore, "localhost", tlsconfig.WithBase(base)))},
		{Name: "deny-10k",
			Server: tlsServer(tlsconfig.MTLSServerConfig(srvStore, tlsconfig.WithBase(base), tlsconfig.WithDenyList(deny))),
			Client: tlsClient(tlsconfig.ClientConfig(cliStore, "localhost", tlsconfig.WithBase(base), tlsconfig.WithDenyList(deny)))},
	})
}
