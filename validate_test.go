package hotcert_test

import (
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
)

func identity(l *hotcerttest.Leaf) hotcert.Content {
	return hotcert.Content{
		Cert: hotcert.Input{Name: "/tls/tls.crt", Data: l.ChainPEM},
		Key:  hotcert.Input{Name: "/tls/tls.key", Data: l.KeyPEM},
	}
}

func withCA(c hotcert.Content, bundle []byte) hotcert.Content {
	c.CA = hotcert.Input{Name: "/ca/ca.crt", Data: bundle}
	return c
}

func TestValidate(t *testing.T) {
	root := hotcerttest.MustNewCA()
	inter := root.MustNewIntermediate()
	other := hotcerttest.MustNewCA()
	leaf := inter.MustIssue()
	otherLeaf := root.MustIssue()
	now := time.Now()
	expired := root.MustIssue(hotcerttest.WithValidity(now.Add(-48*time.Hour), now.Add(-time.Hour)))
	future := root.MustIssue(hotcerttest.WithValidity(now.Add(time.Hour), now.Add(48*time.Hour)))
	clientOnly := root.MustIssue(hotcerttest.WithExtKeyUsages(x509.ExtKeyUsageClientAuth))
	weak := root.MustIssue(hotcerttest.WithKeyType(hotcerttest.RSA1024))
	notCA := root.MustIssue(hotcerttest.WithCommonName("not a ca"))
	expiredNoCN := root.MustIssue(hotcerttest.WithCommonName(""), hotcerttest.WithSubjectOrganization("Acme"),
		hotcerttest.WithValidity(now.Add(-48*time.Hour), now.Add(-time.Hour)))
	expiredNoSubject := root.MustIssue(hotcerttest.WithCommonName(""), hotcerttest.WithValidity(now.Add(-48*time.Hour), now.Add(-time.Hour)))
	bundle := hotcerttest.BundlePEM(root, other)

	mismatched := identity(leaf)
	mismatched.Key.Data = otherLeaf.KeyPEM
	keyInCertFile := identity(leaf)
	keyInCertFile.Cert.Data = append(append([]byte{}, leaf.ChainPEM...), leaf.KeyPEM...)
	textAfter := identity(leaf)
	textAfter.Cert.Data = append(append([]byte{}, leaf.ChainPEM...), []byte("issued by the test CA\n")...)
	cutBlockAfter := identity(leaf)
	cutBlockAfter.Cert.Data = append(append([]byte{}, leaf.ChainPEM...), []byte("-----BEGIN CERTIFICATE-----\nMIIB")...)
	keyOnly := hotcert.Content{Key: hotcert.Input{Name: "/tls/tls.key", Data: leaf.KeyPEM}}
	truncatedKey := identity(leaf)
	truncatedKey.Key.Data = hotcerttest.Truncate(leaf.KeyPEM)

	tests := []struct {
		name    string
		content hotcert.Content
		opts    []hotcert.ValidateOption
		reason  hotcert.Reason
		input   string // the input the error must name
		want    string // substring of the error
	}{
		{name: "identity with intermediate", content: identity(leaf)},
		{name: "identity and union bundle", content: withCA(identity(leaf), bundle)},
		{name: "trust only", content: hotcert.Content{CA: hotcert.Input{Name: "/ca/ca.crt", Data: bundle}}},
		{name: "truncated certificate", content: func() hotcert.Content {
			c := identity(leaf)
			c.Cert.Data = hotcerttest.Truncate(leaf.CertPEM)
			return c
		}(), reason: hotcert.ReasonPEM, input: "/tls/tls.crt", want: "malformed or truncated"},
		{name: "truncated key", content: truncatedKey, reason: hotcert.ReasonPEM, input: "/tls/tls.key", want: "truncated"},
		{name: "key does not match", content: mismatched, reason: hotcert.ReasonKeyMismatch, input: "/tls/tls.key", want: "does not match"},
		{name: "expired", content: identity(expired), reason: hotcert.ReasonExpired, input: "/tls/tls.crt", want: "expired at"},
		{name: "expired, subject without CN", content: identity(expiredNoCN), reason: hotcert.ReasonExpired, want: "leaf certificate (O=Acme serial="},
		{name: "expired, empty subject", content: identity(expiredNoSubject), reason: hotcert.ReasonExpired, want: "leaf certificate (empty subject serial="},
		{name: "not yet valid", content: identity(future), reason: hotcert.ReasonNotYetValid, input: "/tls/tls.crt", want: "not valid before"},
		{name: "empty certificate", content: func() hotcert.Content {
			c := identity(leaf)
			c.Cert.Data = nil
			return c
		}(), reason: hotcert.ReasonEmpty, input: "/tls/tls.crt"},
		{name: "empty bundle", content: withCA(identity(leaf), []byte("\n")), reason: hotcert.ReasonEmpty, input: "/ca/ca.crt", want: "no certificate"},
		{name: "bundle without certificate", content: withCA(identity(leaf), []byte("hello\n")), reason: hotcert.ReasonEmpty, input: "/ca/ca.crt"},
		{name: "bundle with truncated second CA", content: withCA(identity(leaf), hotcerttest.Truncate(bundle)), reason: hotcert.ReasonPEM, input: "/ca/ca.crt", want: "PEM block 2"},
		{name: "non-CA in bundle", content: withCA(identity(leaf), append(hotcerttest.BundlePEM(root), notCA.CertPEM...)), reason: hotcert.ReasonNotCA, input: "/ca/ca.crt", want: "certificate 2 of the CA bundle"},
		{name: "key in certificate file", content: keyInCertFile, reason: hotcert.ReasonPEM, input: "/tls/tls.crt", want: "is a private key, not a CERTIFICATE"},
		{name: "text after chain", content: textAfter},
		{name: "cut block after chain", content: cutBlockAfter, reason: hotcert.ReasonPEM, input: "/tls/tls.crt", want: "PEM block 3"},
		{name: "nil clock is the wall clock", content: identity(leaf), opts: []hotcert.ValidateOption{hotcert.WithClock(nil)}},
		{name: "nil clock still refuses expired", content: identity(expired), opts: []hotcert.ValidateOption{hotcert.WithClock(nil)}, reason: hotcert.ReasonExpired},
		{name: "key without certificate", content: keyOnly, reason: hotcert.ReasonIncomplete, input: "/tls/tls.key"},
		{name: "nothing", content: hotcert.Content{Source: "files"}, reason: hotcert.ReasonIncomplete},
		{name: "chains to given roots", content: identity(leaf), opts: []hotcert.ValidateOption{hotcert.WithChainTo(hotcerttest.Pool(root))}},
		{name: "does not chain to given roots", content: identity(leaf), opts: []hotcert.ValidateOption{hotcert.WithChainTo(hotcerttest.Pool(other))}, reason: hotcert.ReasonChain, input: "/tls/tls.crt"},
		{name: "chains to own bundle", content: withCA(identity(leaf), hotcerttest.BundlePEM(root)), opts: []hotcert.ValidateOption{hotcert.WithChainToOwnTrust()}},
		{name: "does not chain to own bundle", content: withCA(identity(leaf), hotcerttest.BundlePEM(other)), opts: []hotcert.ValidateOption{hotcert.WithChainToOwnTrust()}, reason: hotcert.ReasonChain},
		{name: "required serverAuth present", content: identity(leaf), opts: []hotcert.ValidateOption{hotcert.WithRequiredUsages(x509.ExtKeyUsageServerAuth)}},
		{name: "required serverAuth missing", content: identity(clientOnly), opts: []hotcert.ValidateOption{hotcert.WithRequiredUsages(x509.ExtKeyUsageServerAuth)}, reason: hotcert.ReasonUsage, want: "serverAuth"},
		{name: "weak key refused", content: identity(weak), opts: []hotcert.ValidateOption{hotcert.WithMinKeyStrength(2048, 256)}, reason: hotcert.ReasonWeakKey, want: "1024-bit"},
		{name: "weak key allowed by default", content: identity(weak)},
		{name: "size cap", content: hotcert.Content{CA: hotcert.Input{Name: "/ca/ca.crt", Data: bundle}}, opts: []hotcert.ValidateOption{hotcert.WithMaxInputSize(len(bundle) - 1)}, reason: hotcert.ReasonTooLarge, input: "/ca/ca.crt"},
		{name: "identity required", content: hotcert.Content{CA: hotcert.Input{Name: "/ca/ca.crt", Data: bundle}}, opts: []hotcert.ValidateOption{hotcert.WithRequireIdentity()}, reason: hotcert.ReasonIncomplete},
		{name: "expired judged by injected clock", content: identity(leaf), opts: []hotcert.ValidateOption{hotcert.WithClock(func() time.Time { return now.Add(48 * time.Hour) })}, reason: hotcert.ReasonExpired},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := hotcert.Validate(tc.content, tc.opts...)
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("Validate: unexpected error: %v", err)
				}
				if m.HasIdentity() != tc.content.Cert.Present() || m.HasTrust() != tc.content.CA.Present() {
					t.Fatalf("identity=%v trust=%v, want %v %v", m.HasIdentity(), m.HasTrust(), tc.content.Cert.Present(), tc.content.CA.Present())
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate accepted content it must reject (want %s)", tc.reason)
			}
			var he *hotcert.Error
			if !errors.As(err, &he) {
				t.Fatalf("error %v is not a *hotcert.Error", err)
			}
			if got := hotcert.ReasonOf(err); got != tc.reason {
				t.Errorf("reason = %s, want %s (error: %v)", got, tc.reason, err)
			}
			if tc.input != "" && !strings.HasPrefix(err.Error(), tc.input+": ") {
				t.Errorf("error %q does not start with the input %q", err, tc.input)
			}
			if tc.want != "" && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			assertNoKeyMaterial(t, err.Error(), leaf, otherLeaf, weak)
		})
	}
}

func TestValidateMaterial(t *testing.T) {
	root := hotcerttest.MustNewCA()
	other := hotcerttest.MustNewCA()
	inter := root.MustNewIntermediate()
	leaf := inter.MustIssue()
	m, err := hotcert.Validate(withCA(identity(leaf), hotcerttest.BundlePEM(other, root)))
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Leaf().SerialNumber; got.Cmp(leaf.Cert.SerialNumber) != 0 {
		t.Errorf("leaf serial %s, want %s", got, leaf.Cert.SerialNumber)
	}
	if m.Certificate().Leaf != m.Leaf() || len(m.Certificate().Certificate) != 2 || len(m.Chain()) != 2 {
		t.Errorf("certificate not pre-parsed with full chain")
	}
	if len(m.TrustCertificates()) != 2 || !m.TrustCertificates()[1].Equal(root.Cert) {
		t.Errorf("bundle order or content lost: %d CAs", len(m.TrustCertificates()))
	}
	if m.LeafFingerprint() != hotcert.FingerprintOf(leaf.Cert) || m.TrustFingerprints()[0] != hotcert.FingerprintOf(other.Cert) {
		t.Errorf("fingerprints wrong")
	}
	if _, err := leaf.Cert.Verify(x509.VerifyOptions{Roots: m.TrustPool(), Intermediates: hotcerttest.Pool(inter)}); err != nil {
		t.Errorf("pool lacks the second CA of the bundle: %v", err)
	}
	if !m.NotAfter().Equal(leaf.Cert.NotAfter) || !m.NotBefore().Equal(leaf.Cert.NotBefore) {
		t.Errorf("validity window wrong")
	}
	if fp := m.LeafFingerprint().Colon(); len(fp) != 95 || strings.ToLower(strings.ReplaceAll(fp, ":", "")) != m.LeafFingerprint().String() {
		t.Errorf("colon fingerprint %q", fp)
	}
}

func TestContentHashIsUnambiguous(t *testing.T) {
	a := hotcert.Content{Cert: hotcert.Input{Name: "c", Data: []byte("ab")}, Key: hotcert.Input{Name: "k", Data: []byte("c")}}
	b := hotcert.Content{Cert: hotcert.Input{Name: "c", Data: []byte("a")}, Key: hotcert.Input{Name: "k", Data: []byte("bc")}}
	c := hotcert.Content{Cert: hotcert.Input{Name: "other", Data: []byte("ab")}, Key: hotcert.Input{Name: "k2", Data: []byte("c")}}
	d := hotcert.Content{CA: hotcert.Input{Name: "x", Data: []byte{}}}
	e := hotcert.Content{}
	if a.Hash() == b.Hash() {
		t.Error("moving bytes between parts did not change the hash")
	}
	if a.Hash() != c.Hash() {
		t.Error("names changed the hash of identical bytes")
	}
	if d.Hash() == e.Hash() {
		t.Error("an empty present input hashes like an absent one")
	}
}

// assertNoKeyMaterial fails if s contains any private key PEM or base64 fragment.
func assertNoKeyMaterial(t *testing.T, s string, leaves ...*hotcerttest.Leaf) {
	t.Helper()
	if hotcerttest.ContainsKeyMaterial(s, leaves...) {
		t.Fatalf("output contains key material: %q", s)
	}
}

func TestNilMaterialIsEmpty(t *testing.T) {
	var m *hotcert.Material
	if m.HasIdentity() || m.HasTrust() || m.Certificate() != nil || m.Leaf() != nil || m.TrustPool() != nil ||
		m.Generation() != 0 || m.Source() != "" || !m.NotAfter().IsZero() || m.LeafFingerprint() != (hotcert.Fingerprint{}) ||
		len(m.TrustFingerprints()) != 0 || len(m.Chain()) != 0 || !m.LoadedAt().IsZero() || m.ContentHash() != [32]byte{} {
		t.Fatal("a nil Material is not empty")
	}
}

func TestVerifyChainUsesTheRestOfTheChainAsIntermediates(t *testing.T) {
	root := hotcerttest.MustNewCA()
	inter := root.MustNewIntermediate()
	leaf := inter.MustIssue()
	m, err := hotcert.Validate(identity(leaf))
	if err != nil {
		t.Fatal(err)
	}
	opts := x509.VerifyOptions{Roots: hotcerttest.Pool(root), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	chains, err := hotcert.VerifyChain(m.Chain(), opts)
	if err != nil || len(chains) != 1 || len(chains[0]) != 3 {
		t.Fatalf("VerifyChain: %d chains, %v", len(chains), err)
	}
	if _, err := hotcert.VerifyChain(m.Chain()[:1], opts); err == nil {
		t.Fatal("the leaf verified without its intermediate")
	}
	if opts.Intermediates != nil {
		t.Fatal("VerifyChain changed the caller's options")
	}
	if _, err := hotcert.VerifyChain(nil, opts); err == nil {
		t.Fatal("an empty chain verified")
	}
}
