package hotcerttest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

func verify(t *testing.T, l *Leaf, at time.Time, dnsName string) error {
	t.Helper()
	inter := x509.NewCertPool()
	for _, c := range l.intermediates() {
		inter.AddCert(c.Cert)
	}
	_, err := l.Cert.Verify(x509.VerifyOptions{
		DNSName:       dnsName,
		Roots:         Pool(l.Issuer.Root()),
		Intermediates: inter,
		CurrentTime:   at,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	return err
}

func TestChainVerifies(t *testing.T) {
	root := MustNewCA()
	i1 := root.MustNewIntermediate()
	i2 := i1.MustNewIntermediate()
	for name, ca := range map[string]*CA{"root": root, "intermediate": i1, "two intermediates": i2} {
		t.Run(name, func(t *testing.T) {
			l := ca.MustIssue()
			if err := verify(t, l, time.Now(), "localhost"); err != nil {
				t.Fatalf("verify: %v", err)
			}
			if ca.Root() != root {
				t.Fatalf("Root() is not the root")
			}
			// ChainPEM holds the leaf and every intermediate, not the root.
			var n int
			for rest := l.ChainPEM; ; n++ {
				var b *pem.Block
				if b, rest = pem.Decode(rest); b == nil {
					break
				}
				if bytes.Equal(b.Bytes, root.Cert.Raw) {
					t.Fatalf("ChainPEM contains the root")
				}
			}
			if want := 1 + len(l.intermediates()); n != want || len(l.TLSCertificate().Certificate) != want {
				t.Fatalf("chain has %d PEM blocks / %d DER certs, want %d", n, len(l.TLSCertificate().Certificate), want)
			}
			if !bytes.Equal(l.Cert.AuthorityKeyId, ca.Cert.SubjectKeyId) || len(l.Cert.SubjectKeyId) == 0 {
				t.Fatalf("SKI/AKI not set: ski=%x aki=%x issuer ski=%x", l.Cert.SubjectKeyId, l.Cert.AuthorityKeyId, ca.Cert.SubjectKeyId)
			}
		})
	}
	if root.Parent != nil || i2.Parent != i1 || !root.Cert.IsCA || !i2.Cert.IsCA {
		t.Fatalf("bad CA hierarchy")
	}
	if root.Cert.KeyUsage != x509.KeyUsageCertSign|x509.KeyUsageCRLSign {
		t.Fatalf("root key usage = %v", root.Cert.KeyUsage)
	}
	if !strings.HasPrefix(root.Cert.Subject.CommonName, "hotcert test CA ") || root.Cert.Subject.CommonName == MustNewCA().Cert.Subject.CommonName {
		t.Fatalf("root CN %q is not a random test CA name", root.Cert.Subject.CommonName)
	}
	// A leaf does not verify against an unrelated root.
	if err := verify(t, &Leaf{Cert: root.MustIssue().Cert, Issuer: MustNewCA()}, time.Now(), ""); err == nil {
		t.Fatalf("leaf verified against an unrelated root")
	}
}

func TestLeafDefaults(t *testing.T) {
	l := MustNewCA().MustIssue()
	c := l.Cert
	if c.Subject.CommonName != "localhost" || !slices.Equal(c.DNSNames, []string{"localhost"}) {
		t.Errorf("CN %q DNS %v", c.Subject.CommonName, c.DNSNames)
	}
	if len(c.IPAddresses) != 2 || !c.IPAddresses[0].Equal(net.IPv4(127, 0, 0, 1)) || !c.IPAddresses[1].Equal(net.IPv6loopback) {
		t.Errorf("IPs %v", c.IPAddresses)
	}
	if !slices.Equal(c.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}) {
		t.Errorf("EKU %v", c.ExtKeyUsage)
	}
	if c.KeyUsage != x509.KeyUsageDigitalSignature || c.IsCA {
		t.Errorf("key usage %v, IsCA %v", c.KeyUsage, c.IsCA)
	}
	if d := c.NotAfter.Sub(c.NotBefore); d != 24*time.Hour+time.Minute {
		t.Errorf("validity %v", d)
	}
	if c.SerialNumber.Sign() <= 0 || c.SerialNumber.BitLen() > 128 {
		t.Errorf("serial %v", c.SerialNumber)
	}
	if _, ok := l.Key.(*ecdsa.PrivateKey); !ok {
		t.Errorf("default key is %T", l.Key)
	}
	if b, _ := pem.Decode(l.KeyPEM); b == nil || b.Type != "PRIVATE KEY" {
		t.Errorf("KeyPEM is not PKCS#8")
	}
	if err := verify(t, l, time.Now(), "127.0.0.1"); err != nil {
		t.Errorf("verify IP SAN: %v", err)
	}
}

func TestOptions(t *testing.T) {
	ca := MustNewCA(WithSubjectOrganization("hotcert"), WithCommonName("my root"))
	if ca.Cert.Subject.CommonName != "my root" || !slices.Equal(ca.Cert.Subject.Organization, []string{"hotcert"}) {
		t.Fatalf("CA subject %v", ca.Cert.Subject)
	}
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	l := ca.MustIssue(
		WithCommonName("svc"),
		WithDNSNames("a.example.com", "b.example.com"),
		WithIPAddresses(),
		WithExtKeyUsages(x509.ExtKeyUsageClientAuth),
		WithSerial(big.NewInt(42)),
		WithNow(func() time.Time { return now }),
		WithLifetime(time.Hour),
		WithURIs("spiffe://example.org/svc"),
	)
	c := l.Cert
	if len(c.URIs) != 1 || c.URIs[0].String() != "spiffe://example.org/svc" {
		t.Errorf("URI SANs %v", c.URIs)
	}
	if c.Subject.CommonName != "svc" || !slices.Equal(c.DNSNames, []string{"a.example.com", "b.example.com"}) || len(c.IPAddresses) != 0 {
		t.Errorf("subject/SANs: %q %v %v", c.Subject.CommonName, c.DNSNames, c.IPAddresses)
	}
	if !slices.Equal(c.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) {
		t.Errorf("EKU %v", c.ExtKeyUsage)
	}
	if c.SerialNumber.Int64() != 42 {
		t.Errorf("serial %v", c.SerialNumber)
	}
	if !c.NotBefore.Equal(now.Add(-time.Minute)) || !c.NotAfter.Equal(now.Add(time.Hour)) {
		t.Errorf("validity %v..%v", c.NotBefore, c.NotAfter)
	}
	// A clientAuth-only leaf is rejected for serverAuth.
	var invalid x509.CertificateInvalidError
	if err := verify(t, l, now, "a.example.com"); !errors.As(err, &invalid) || invalid.Reason != x509.IncompatibleUsage {
		t.Errorf("serverAuth verify of clientAuth leaf: %v", err)
	}

	// WithValidity and WithLifetime: the last one wins.
	nb, na := now.Add(-time.Hour), now.Add(2*time.Hour)
	if c := ca.MustIssue(WithLifetime(time.Hour), WithValidity(nb, na)).Cert; !c.NotBefore.Equal(nb) || !c.NotAfter.Equal(na) {
		t.Errorf("WithValidity: %v..%v", c.NotBefore, c.NotAfter)
	}
	if c := ca.MustIssue(WithValidity(nb, na), WithLifetime(time.Hour), WithNow(func() time.Time { return now })).Cert; !c.NotAfter.Equal(now.Add(time.Hour)) {
		t.Errorf("WithLifetime after WithValidity: %v", c.NotAfter)
	}
	if _, err := ca.Issue(WithValidity(na, nb)); err == nil || !strings.HasPrefix(err.Error(), "hotcerttest: issue: ") {
		t.Errorf("inverted validity: %v", err)
	}

	// WithIsCA both ways.
	notCA := MustNewCA(WithIsCA(false))
	if notCA.Cert.IsCA || notCA.Cert.KeyUsage&x509.KeyUsageCertSign != 0 {
		t.Errorf("WithIsCA(false) CA: IsCA %v usage %v", notCA.Cert.IsCA, notCA.Cert.KeyUsage)
	}
	if caLeaf := ca.MustIssue(WithIsCA(true)); !caLeaf.Cert.IsCA || caLeaf.Cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Errorf("WithIsCA(true) leaf: IsCA %v usage %v", caLeaf.Cert.IsCA, caLeaf.Cert.KeyUsage)
	}
	// A leaf of a non-CA "CA" does not verify.
	if err := verify(t, notCA.MustIssue(), time.Now(), "localhost"); err == nil {
		t.Errorf("leaf of a non-CA verified")
	}
}

func TestNameConstraints(t *testing.T) {
	root := MustNewCA()
	inter := root.MustNewIntermediate(WithPermittedDNSDomains("example.com"))
	if !inter.Cert.PermittedDNSDomainsCritical {
		t.Fatalf("name constraints not critical")
	}
	ok := inter.MustIssue(WithDNSNames("svc.example.com"), WithIPAddresses())
	if err := verify(t, ok, time.Now(), "svc.example.com"); err != nil {
		t.Fatalf("permitted name: %v", err)
	}
	bad := inter.MustIssue(WithDNSNames("svc.example.org"), WithIPAddresses())
	var invalid x509.CertificateInvalidError
	if err := verify(t, bad, time.Now(), "svc.example.org"); !errors.As(err, &invalid) || invalid.Reason != x509.CANotAuthorizedForThisName {
		t.Fatalf("excluded name: %v", err)
	}
}

func TestValidityErrors(t *testing.T) {
	ca := MustNewCA()
	now := time.Now()
	for name, opt := range map[string]Option{
		"expired":             WithValidity(now.Add(-2*time.Hour), now.Add(-time.Hour)),
		"not yet valid":       WithValidity(now.Add(time.Hour), now.Add(2*time.Hour)),
		"expired via WithNow": WithNow(func() time.Time { return now.Add(-48 * time.Hour) }),
	} {
		t.Run(name, func(t *testing.T) {
			var invalid x509.CertificateInvalidError
			if err := verify(t, ca.MustIssue(opt), now, "localhost"); !errors.As(err, &invalid) || invalid.Reason != x509.Expired {
				t.Fatalf("want x509.Expired, got %v", err)
			}
		})
	}
	// An expired intermediate breaks a valid leaf below it.
	inter := ca.MustNewIntermediate(WithValidity(now.Add(-2*time.Hour), now.Add(-time.Hour)))
	if err := verify(t, inter.MustIssue(), now, "localhost"); err == nil {
		t.Fatalf("leaf under expired intermediate verified")
	}
}

func TestKeyTypes(t *testing.T) {
	root := MustNewCA()
	for _, kt := range []KeyType{ECDSAP256, ECDSAP384, RSA2048, RSA3072, RSA1024, Ed25519} {
		t.Run(kt.String(), func(t *testing.T) {
			t.Parallel()
			inter := root.MustNewIntermediate(WithKeyType(kt))
			l := inter.MustIssue(WithKeyType(kt))
			pair, err := tls.X509KeyPair(l.ChainPEM, l.KeyPEM)
			if err != nil {
				t.Fatalf("X509KeyPair: %v", err)
			}
			if len(pair.Certificate) != 2 {
				t.Fatalf("pair has %d certs", len(pair.Certificate))
			}
			if err := verify(t, l, time.Now(), "localhost"); err != nil {
				t.Fatalf("verify: %v", err)
			}
			switch k := l.Key.(type) {
			case *rsa.PrivateKey:
				if want := map[KeyType]int{RSA1024: 1024, RSA2048: 2048, RSA3072: 3072}[kt]; k.N.BitLen() != want {
					t.Fatalf("RSA size %d, want %d", k.N.BitLen(), want)
				}
				if l.Cert.KeyUsage&x509.KeyUsageKeyEncipherment == 0 {
					t.Fatalf("RSA leaf lacks KeyEncipherment")
				}
			case *ecdsa.PrivateKey:
				if want := map[KeyType]int{ECDSAP256: 256, ECDSAP384: 384}[kt]; k.Curve.Params().BitSize != want {
					t.Fatalf("curve %d, want %d", k.Curve.Params().BitSize, want)
				}
			case ed25519.PrivateKey:
				if kt != Ed25519 {
					t.Fatalf("got Ed25519 for %v", kt)
				}
			default:
				t.Fatalf("key %T", k)
			}
		})
	}
	if _, err := NewCA(WithKeyType(KeyType(99))); err == nil || !strings.HasPrefix(err.Error(), "hotcerttest: new CA: ") {
		t.Fatalf("unknown key type: %v", err)
	}
}

func TestKeyPEMWithType(t *testing.T) {
	root := MustNewCA()
	ec, rsaLeaf, ed := root.MustIssue(), root.MustIssue(WithKeyType(RSA2048)), root.MustIssue(WithKeyType(Ed25519))
	for _, tc := range []struct {
		l       *Leaf
		f       KeyFormat
		pemType string // "" means an error is expected
	}{
		{ec, KeyFormatPKCS8, "PRIVATE KEY"}, {ec, KeyFormatSEC1, "EC PRIVATE KEY"}, {ec, KeyFormatPKCS1, ""},
		{rsaLeaf, KeyFormatPKCS1, "RSA PRIVATE KEY"}, {rsaLeaf, KeyFormatSEC1, ""},
		{ed, KeyFormatPKCS8, "PRIVATE KEY"}, {ed, KeyFormatSEC1, ""}, {ed, KeyFormat(9), ""},
	} {
		b, err := tc.l.KeyPEMWithType(tc.f)
		if tc.pemType == "" {
			if err == nil {
				t.Errorf("%T format %d: no error", tc.l.Key, tc.f)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%T format %d: %v", tc.l.Key, tc.f, err)
		}
		if blk, _ := pem.Decode(b); blk == nil || blk.Type != tc.pemType {
			t.Errorf("%T format %d: PEM type %v", tc.l.Key, tc.f, blk)
		}
		if _, err := tls.X509KeyPair(tc.l.ChainPEM, b); err != nil {
			t.Errorf("%T format %d: X509KeyPair: %v", tc.l.Key, tc.f, err)
		}
	}
}

func TestTLSHandshake(t *testing.T) {
	root := MustNewCA()
	server := root.MustNewIntermediate().MustIssue()
	client := root.MustIssue(WithCommonName("client"))
	cc, sc := net.Pipe()
	defer cc.Close()
	defer sc.Close()
	srv := tls.Server(sc, &tls.Config{
		Certificates: []tls.Certificate{server.TLSCertificate()},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    Pool(root),
	})
	errc := make(chan error, 1)
	go func() { errc <- srv.Handshake() }()
	cli := tls.Client(cc, &tls.Config{RootCAs: Pool(root), ServerName: "localhost", Certificates: []tls.Certificate{client.TLSCertificate()}})
	if err := cli.Handshake(); err != nil {
		t.Fatalf("client handshake: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("server handshake: %v", err)
	}
	if got := srv.ConnectionState().PeerCertificates[0].Subject.CommonName; got != "client" {
		t.Fatalf("server saw client %q", got)
	}
}

func TestBundleAndTruncate(t *testing.T) {
	a, b := MustNewCA(), MustNewCA()
	bundle := BundlePEM(a, b)
	if !bytes.Equal(bundle, append(append([]byte(nil), a.CertPEM...), b.CertPEM...)) {
		t.Fatalf("BundlePEM is not the concatenation in order")
	}
	l := a.MustIssue()
	for name, in := range map[string][]byte{"cert": l.CertPEM, "key": l.KeyPEM, "chain": l.ChainPEM} {
		out := Truncate(in)
		if len(out) == 0 || len(out) >= len(in) || !bytes.HasPrefix(in, out) {
			t.Fatalf("%s: Truncate gave %d of %d bytes", name, len(out), len(in))
		}
		if blk, _ := pem.Decode(out); blk != nil {
			t.Fatalf("%s: truncated PEM still decodes", name)
		}
	}
	if _, err := tls.X509KeyPair(Truncate(l.CertPEM), l.KeyPEM); err == nil {
		t.Fatalf("X509KeyPair accepted a truncated cert")
	}
	if _, err := tls.X509KeyPair(l.CertPEM, Truncate(l.KeyPEM)); err == nil {
		t.Fatalf("X509KeyPair accepted a truncated key")
	}
	if x509.NewCertPool().AppendCertsFromPEM(Truncate(a.CertPEM)) {
		t.Fatalf("AppendCertsFromPEM accepted a truncated cert")
	}
	// A bundle whose last block is truncated silently loads one CA only.
	broken := Truncate(bundle)
	first, rest := pem.Decode(broken)
	if first == nil || !bytes.Equal(first.Bytes, a.Cert.Raw) {
		t.Fatalf("first block of truncated bundle lost")
	}
	if blk, _ := pem.Decode(rest); blk != nil {
		t.Fatalf("second block of truncated bundle still decodes")
	}
	if got := Truncate([]byte("no pem here!")); string(got) != "no pem" {
		t.Fatalf("Truncate of non-PEM = %q", got)
	}
}

func TestMustPanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil {
			t.Fatalf("MustIssue did not panic")
		}
	}()
	MustNewCA().MustIssue(WithKeyType(KeyType(-1)))
}
