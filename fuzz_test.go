package hotcert_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
)

// The fuzz targets check Validate's promises on arbitrary input: it never panics,
// never accepts a chain or bundle with a block x509.ParseCertificate cannot parse
// (or a block it skipped), never accepts a pair crypto/tls refuses, and never puts
// key bytes in an error. Seeds: testdata/fuzz/<target>/ (checked in) and the f.Add
// calls below. `make fuzz` runs each target; `make test` runs the seeds.

// fuzzNow is the validation clock of the fuzz targets: inside the validity of the
// checked-in seeds, so a run does not depend on the day it runs.
var fuzzNow = time.Date(2027, 6, 1, 0, 0, 0, 0, time.UTC)

func fuzzValidate(c hotcert.Content) (*hotcert.Material, error) {
	return hotcert.Validate(c, hotcert.WithClock(func() time.Time { return fuzzNow }))
}

// seedLeaf issues a leaf valid at fuzzNow under an intermediate, for f.Add seeds.
func seedLeaf() (*hotcerttest.CA, *hotcerttest.Leaf) {
	from, to := fuzzNow.AddDate(-1, 0, 0), fuzzNow.AddDate(1, 0, 0)
	root := hotcerttest.MustNewCA(hotcerttest.WithValidity(from, to))
	inter := root.MustNewIntermediate(hotcerttest.WithValidity(from, to))
	return root, inter.MustIssue(hotcerttest.WithValidity(from, to))
}

// strictCertificates is the oracle for a chain or bundle Validate accepted: read
// with encoding/pem alone, block by block, every "-----BEGIN" must have become a
// block (none skipped), and every CERTIFICATE block must parse with
// x509.ParseCertificate. It returns the certificates.
func strictCertificates(t *testing.T, what string, data []byte) []*x509.Certificate {
	t.Helper()
	var certs []*x509.Certificate
	blocks := 0
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		blocks++
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatalf("%s accepted with a certificate block x509.ParseCertificate refuses: %v", what, err)
		}
		certs = append(certs, c)
	}
	if n := bytes.Count(data, []byte("-----BEGIN ")); n != blocks {
		t.Fatalf("%s accepted with %d BEGIN lines but only %d blocks encoding/pem can decode", what, n, blocks)
	}
	for i, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimRight(line, "\r")
		whole := bytes.HasSuffix(line, []byte("-----")) && (bytes.HasPrefix(line, []byte("-----BEGIN ")) || bytes.HasPrefix(line, []byte("-----END ")))
		if len(line) > 0 && line[0] == '-' && !whole {
			t.Fatalf("%s accepted with line %d (%q) starting with dashes: a marker cut short", what, i+1, line[:min(len(line), 16)])
		}
	}
	return certs
}

// keyFragments returns the base64 lines of every private key block of data (and
// of anything that looks like one), the bytes an error must never repeat.
func keyFragments(data []byte) []string {
	var out []string
	inKey := false
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "-----BEGIN") && strings.Contains(line, "PRIVATE KEY"):
			inKey = true
		case strings.HasPrefix(line, "-----END"):
			inKey = false
		case inKey && len(line) >= 16 && !strings.Contains(line, ":"):
			out = append(out, line[:16])
		}
	}
	return out
}

// checkNoKeyBytes fails if err repeats key material of in: a base64 line of a
// private key block, a private key block type, or (raw, for a key file) any
// 16-byte run of the input.
func checkNoKeyBytes(t *testing.T, err error, in []byte, raw bool) {
	t.Helper()
	if err == nil {
		return
	}
	msg := err.Error()
	if strings.Contains(msg, "PRIVATE KEY") {
		t.Fatalf("error names a private key block type: %q", msg)
	}
	for _, frag := range keyFragments(in) {
		if strings.Contains(msg, frag) {
			t.Fatalf("error contains key bytes %q: %q", frag, msg)
		}
	}
	if raw {
		// Raw bytes of the key input, e.g. from a parser echoing its input.
		for i := 0; i+16 <= len(in); i += 16 {
			if frag := string(in[i : i+16]); !strings.ContainsAny(frag, " \n-") && strings.Contains(msg, frag) {
				t.Fatalf("error contains key input bytes %q: %q", frag, msg)
			}
		}
	}
	if hotcert.ReasonOf(err) == "" {
		t.Fatalf("error without a reason: %v", err)
	}
}

// FuzzValidateBundle: a CA bundle alone.
func FuzzValidateBundle(f *testing.F) {
	root, leaf := seedLeaf()
	other := hotcerttest.MustNewCA(hotcerttest.WithValidity(fuzzNow.AddDate(-1, 0, 0), fuzzNow.AddDate(1, 0, 0)))
	bundle := hotcerttest.BundlePEM(root, other)
	f.Add(bundle)
	f.Add(append([]byte("# comment\n"), bundle...))
	f.Add(hotcerttest.Truncate(bundle))
	f.Add(append(append([]byte{}, bundle...), "-----BEGIN"...)) // cut inside the next BEGIN line
	f.Add(append(append([]byte{}, bundle...), leaf.KeyPEM...))
	f.Fuzz(func(t *testing.T, data []byte) {
		in := hotcert.Input{Name: "/ca/ca.crt", Data: data}
		m, err := fuzzValidate(hotcert.Content{CA: in})
		checkNoKeyBytes(t, err, data, false)
		if err != nil {
			return
		}
		certs := strictCertificates(t, "bundle", data)
		if len(certs) != len(m.TrustCertificates()) {
			t.Fatalf("bundle of %d certificates became %d CAs", len(certs), len(m.TrustCertificates()))
		}
		for i, c := range certs {
			if !c.IsCA || !c.Equal(m.TrustCertificates()[i]) {
				t.Fatalf("CA %d is not the bundle's certificate %d, or not a CA", i+1, i+1)
			}
		}
	})
}

// FuzzValidateIdentity: a certificate chain, its key and a bundle, as PEM.
func FuzzValidateIdentity(f *testing.F) {
	root, leaf := seedLeaf()
	sec1, err := leaf.KeyPEMWithType(hotcerttest.KeyFormatSEC1)
	if err != nil {
		f.Fatal(err)
	}
	params := []byte("-----BEGIN EC PARAMETERS-----\nBggqhkjOPQMBBw==\n-----END EC PARAMETERS-----\n")
	ca := hotcerttest.BundlePEM(root)
	f.Add(leaf.ChainPEM, leaf.KeyPEM, ca)
	f.Add(leaf.ChainPEM, append(params, sec1...), ca)
	f.Add(hotcerttest.Truncate(leaf.ChainPEM), leaf.KeyPEM, []byte(nil))
	f.Add(leaf.ChainPEM, hotcerttest.Truncate(leaf.KeyPEM), ca)
	f.Add(leaf.ChainPEM, append(append([]byte{}, leaf.KeyPEM...), leaf.KeyPEM...), ca)
	f.Fuzz(func(t *testing.T, cert, key, bundle []byte) {
		c := hotcert.Content{
			Cert: hotcert.Input{Name: "/tls/tls.crt", Data: cert},
			Key:  hotcert.Input{Name: "/tls/tls.key", Data: key},
		}
		if len(bundle) > 0 {
			c.CA = hotcert.Input{Name: "/tls/ca.crt", Data: bundle}
		}
		m, err := fuzzValidate(c)
		checkNoKeyBytes(t, err, key, true)
		if err != nil {
			return
		}
		chain := strictCertificates(t, "chain", cert)
		if len(chain) != len(m.Chain()) || !chain[0].Equal(m.Leaf()) {
			t.Fatalf("chain of %d certificates became %d", len(chain), len(m.Chain()))
		}
		if c.CA.Present() {
			strictCertificates(t, "bundle", bundle)
		}
		// Never accept a pair crypto/tls refuses.
		if _, err := tls.X509KeyPair(cert, key); err != nil {
			t.Fatalf("accepted a pair crypto/tls refuses: %v", err)
		}
	})
}

// FuzzValidateDER: certificate and key DER, mutated directly (below the PEM
// layer), framed as PEM. Run it with a minimization bounded by a count
// (-fuzzminimizetime 1000x, as make fuzz does): mutated DER reaches new code
// every few inputs, and Go's minimizer, quadratic in the length of these
// kilobyte inputs, spends its default 60 s on each of them.
func FuzzValidateDER(f *testing.F) {
	_, leaf := seedLeaf()
	keyBlock, _ := pem.Decode(leaf.KeyPEM)
	for _, typ := range []uint8{0, 1, 2} {
		f.Add(leaf.Cert.Raw, keyBlock.Bytes, typ)
	}
	f.Fuzz(func(t *testing.T, certDER, keyDER []byte, typ uint8) {
		keyType := [...]string{"PRIVATE KEY", "EC PRIVATE KEY", "RSA PRIVATE KEY"}[int(typ)%3]
		cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: certDER})
		key := pem.EncodeToMemory(&pem.Block{Type: keyType, Bytes: keyDER})
		m, err := fuzzValidate(hotcert.Content{
			Cert: hotcert.Input{Name: "/tls/tls.crt", Data: cert},
			Key:  hotcert.Input{Name: "/tls/tls.key", Data: key},
		})
		checkNoKeyBytes(t, err, key, true)
		if err != nil {
			return
		}
		if _, err := x509.ParseCertificate(certDER); err != nil {
			t.Fatalf("accepted a certificate x509.ParseCertificate refuses: %v", err)
		}
		if _, err := tls.X509KeyPair(cert, key); err != nil {
			t.Fatalf("accepted a pair crypto/tls refuses: %v", err)
		}
		if !bytes.Equal(m.Leaf().Raw, certDER) {
			t.Fatal("the leaf is not the certificate given")
		}
	})
}

// TestFuzzSeedsReachAcceptance: the generated seeds of the identity and bundle
// targets validate, so the fuzz targets' acceptance checks run from the first
// input on (a target whose every seed is refused would test refusals only).
func TestFuzzSeedsReachAcceptance(t *testing.T) {
	root, leaf := seedLeaf()
	if _, err := fuzzValidate(withCA(identity(leaf), hotcerttest.BundlePEM(root))); err != nil {
		t.Fatal(err)
	}
}
