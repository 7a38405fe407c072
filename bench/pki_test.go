//go:build unix

package bench_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"

	"github.com/hotcert/hotcert/hotcerttest"
)

// pki is one CA and two ECDSA P-256 leaves carrying the DNS name localhost, the IP
// 127.0.0.1 and a SPIFFE ID, so that every row of a benchmark handshakes with the
// very same certificates.
type pki struct {
	ca       *hotcerttest.CA
	dir      string // server: tls.crt tls.key; client: client.crt client.key; ca.crt
	srv, cli tls.Certificate
	srvSVID  *x509svid.SVID
	cliSVID  *x509svid.SVID
	bundle   *x509bundle.Bundle
}

func newPKI(b *testing.B) *pki {
	p := &pki{ca: hotcerttest.MustNewCA(), dir: b.TempDir()}
	td := spiffeid.RequireTrustDomainFromString("example.org")
	srvCert, srvKey := issue(b, p.ca, "spiffe://example.org/control-plane")
	cliCert, cliKey := issue(b, p.ca, "spiffe://example.org/agent")
	write(b, filepath.Join(p.dir, "tls.crt"), srvCert)
	write(b, filepath.Join(p.dir, "tls.key"), srvKey)
	write(b, filepath.Join(p.dir, "client.crt"), cliCert)
	write(b, filepath.Join(p.dir, "client.key"), cliKey)
	write(b, filepath.Join(p.dir, "ca.crt"), p.ca.CertPEM)
	var err error
	if p.srv, err = tls.X509KeyPair(srvCert, srvKey); err != nil {
		b.Fatal(err)
	}
	if p.cli, err = tls.X509KeyPair(cliCert, cliKey); err != nil {
		b.Fatal(err)
	}
	if p.srvSVID, err = x509svid.Parse(srvCert, srvKey); err != nil {
		b.Fatal(err)
	}
	if p.cliSVID, err = x509svid.Parse(cliCert, cliKey); err != nil {
		b.Fatal(err)
	}
	p.bundle = x509bundle.FromX509Authorities(td, []*x509.Certificate{p.ca.Cert})
	return p
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

func (p *pki) pool() *x509.CertPool { return hotcerttest.Pool(p.ca) }

func issue(b *testing.B, ca *hotcerttest.CA, spiffeID string) (certPEM, keyPEM []byte) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	id, _ := url.Parse(spiffeID)
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "localhost"},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		URIs:         []*url.URL{id},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		b.Fatal(err)
	}
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		b.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk})
}

func write(b *testing.B, path string, data []byte) {
	if err := os.WriteFile(path, data, 0o600); err != nil {
		b.Fatal(err)
	}
}
