package hotcert_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
)

// runOpenSSL runs openssl in dir and fails the test when it is missing or fails
// (.ci/run installs it; the runbook's checks use it).
func runOpenSSL(t *testing.T, dir string, args ...string) []byte {
	t.Helper()
	bin, err := exec.LookPath("openssl")
	if err != nil {
		t.Fatal("openssl is required: these tests check files written by openssl itself")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("openssl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// TestOpenSSLECParamKeyLoads: `openssl ecparam -genkey` writes an EC PARAMETERS
// block before the key; crypto/tls loads such a file, and so must Validate.
func TestOpenSSLECParamKeyLoads(t *testing.T) {
	dir := t.TempDir()
	runOpenSSL(t, dir, "ecparam", "-name", "prime256v1", "-genkey", "-out", "tls.key")
	runOpenSSL(t, dir, "req", "-new", "-x509", "-key", "tls.key", "-subj", "/CN=ecparam", "-days", "1", "-out", "tls.crt")
	keyPEM, err := os.ReadFile(filepath.Join(dir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := os.ReadFile(filepath.Join(dir, "tls.crt"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(keyPEM, []byte("-----BEGIN EC PARAMETERS-----")) {
		t.Fatalf("openssl ecparam -genkey wrote no EC PARAMETERS block; the test checks nothing:\n%s", keyPEM)
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Fatalf("crypto/tls refuses the openssl pair too: %v", err)
	}
	m, err := hotcert.Validate(hotcert.Content{
		Cert: hotcert.Input{Name: filepath.Join(dir, "tls.crt"), Data: certPEM},
		Key:  hotcert.Input{Name: filepath.Join(dir, "tls.key"), Data: keyPEM},
	})
	if err != nil {
		t.Fatalf("Validate refuses a key written by openssl ecparam -genkey: %v", err)
	}
	if _, ok := m.Certificate().PrivateKey.(*ecdsa.PrivateKey); !ok || m.Leaf().Subject.CommonName != "ecparam" {
		t.Fatalf("loaded %T for %q", m.Certificate().PrivateKey, m.Leaf().Subject.CommonName)
	}
}

// TestFormatSerialMatchesOpenSSL: serials are printed as `openssl x509 -serial`
// prints them, leading zero included.
func TestFormatSerialMatchesOpenSSL(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	dir := t.TempDir()
	for _, serial := range []int64{0x0abc, 0x1f, 0x01, 0x7f00, 0x0f0e0d0c0b0a} {
		leaf := ca.MustIssue(hotcerttest.WithSerial(big.NewInt(serial)))
		f := filepath.Join(dir, "leaf.crt")
		if err := os.WriteFile(f, leaf.CertPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		out := strings.TrimSpace(string(runOpenSSL(t, dir, "x509", "-in", "leaf.crt", "-noout", "-serial")))
		if got, want := "serial="+hotcert.FormatSerial(leaf.Cert.SerialNumber), out; got != want {
			t.Errorf("serial %#x: FormatSerial gives %q, openssl prints %q", serial, got, want)
		}
	}
	if got := hotcert.FormatSerial(big.NewInt(-0xabc)); got != "-0ABC" {
		t.Errorf("negative serial formatted %q", got)
	}
	if got := hotcert.FormatSerial(nil); got != "" {
		t.Errorf("nil serial formatted %q", got)
	}
}

func TestValidateErrorsPrintSerialsAsOpenSSL(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	now := time.Now()
	expired := ca.MustIssue(hotcerttest.WithSerial(big.NewInt(0x0abc)), hotcerttest.WithValidity(now.Add(-2*time.Hour), now.Add(-time.Hour)))
	_, err := hotcert.Validate(identity(expired))
	if err == nil || !strings.Contains(err.Error(), "serial=0ABC") {
		t.Fatalf("error %v does not name serial 0ABC as openssl prints it", err)
	}
}

func TestPEMGrammar(t *testing.T) {
	root := hotcerttest.MustNewCA()
	other := hotcerttest.MustNewCA()
	leaf := root.MustIssue()
	a, b := hotcerttest.BundlePEM(root), hotcerttest.BundlePEM(other)
	// garble breaks the base64 of the block that starts at the first BEGIN of p.
	garble := func(p []byte) []byte {
		out := bytes.Clone(p)
		nl := bytes.IndexByte(out, '\n')
		copy(out[nl+1:], "!!!!")
		return out
	}
	noEnd := func(p []byte) []byte { return p[:bytes.Index(p, []byte("-----END "))] }
	ecParams := []byte("-----BEGIN EC PARAMETERS-----\nBggqhkjOPQMBBw==\n-----END EC PARAMETERS-----\n")

	t.Run("bundles", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			data   []byte
			n      int            // certificates, when accepted
			reason hotcert.Reason // when refused
			want   string
		}{
			{name: "text outside blocks", data: cat([]byte("# Root A\nsubject=CN=a\n"), a, []byte("\nCertificate:\n    Data: ...\n"), b, []byte("trailing text\n")), n: 2},
			{name: "openssl -text output", data: cat([]byte("Certificate:\n    Data:\n        Version: 3 (0x2)\n"), a), n: 1},
			{name: "CRLF line endings", data: bytes.ReplaceAll(cat(a, b), []byte("\n"), []byte("\r\n")), n: 2},
			{name: "parameters block skipped", data: cat(ecParams, a), n: 1},
			{name: "dashes inside a line of text", data: cat([]byte("subject=CN=a-b -- c\n  ---\n"), a, b), n: 2},
			{name: "cut inside the next BEGIN", data: cat(a, b[:len("-----BEG")]), reason: hotcert.ReasonPEM, want: "line 12 starts with dashes but is not a whole BEGIN or END line"},
			{name: "one dash after the bundle", data: cat(a, b, []byte("-")), reason: hotcert.ReasonPEM, want: "starts with dashes"},
			{name: "dash line after the bundle", data: cat(a, b, []byte("-----\n")), reason: hotcert.ReasonPEM, want: "starts with dashes"},
			{name: "dash separator between blocks", data: cat(a, []byte("---\n"), b), reason: hotcert.ReasonPEM, want: "starts with dashes"},
			{name: "BEGIN without its space", data: cat(a, []byte("-----BEGIN-----\n"), b), reason: hotcert.ReasonPEM, want: "starts with dashes"},
			{name: "END without its space", data: cat(a, []byte("-----END\n")), reason: hotcert.ReasonPEM, want: "starts with dashes"},
			{name: "garbled middle block, good block after it", data: cat(a, garble(b), a), reason: hotcert.ReasonPEM, want: `PEM block 2 (a "CERTIFICATE", line `},
			{name: "middle block without END, good block after it", data: cat(a, noEnd(b), a), reason: hotcert.ReasonPEM, want: "PEM block 2"},
			{name: "truncated last block", data: cat(a, hotcerttest.Truncate(b)), reason: hotcert.ReasonPEM, want: "PEM block 2"},
			{name: "cut BEGIN line", data: cat(a, []byte("-----BEGIN CERTIF")), reason: hotcert.ReasonPEM, want: "PEM block 2 (a garbled BEGIN line"},
			{name: "BEGIN inside a line", data: cat(a, []byte("0"), b), reason: hotcert.ReasonPEM, want: "does not begin at the start of a line"},
			{name: "END without BEGIN", data: cat(a, b[bytes.IndexByte(b, '\n')+1:]), reason: hotcert.ReasonPEM, want: "has no BEGIN line"},
			{name: "block that is not a certificate", data: cat(a, leaf.KeyPEM), reason: hotcert.ReasonPEM, want: "PEM block 2 is a private key, not a CERTIFICATE"},
			{name: "public key in bundle", data: cat(a, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte{1}})), reason: hotcert.ReasonPEM, want: `is a "PUBLIC KEY"`},
			{name: "well-framed block that does not parse", data: cat(a, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("nope")})), reason: hotcert.ReasonParse, want: "certificate 2 does not parse"},
			{name: "only text", data: []byte("nothing here\n"), reason: hotcert.ReasonEmpty},
		} {
			t.Run(tc.name, func(t *testing.T) {
				certs, err := hotcert.ParseCertificates(hotcert.Input{Name: "/ca/ca.crt", Data: tc.data})
				if tc.reason == "" {
					if err != nil || len(certs) != tc.n {
						t.Fatalf("got %d certificates, %v; want %d", len(certs), err, tc.n)
					}
					// The same content passes Validate as a CA bundle.
					if _, err := hotcert.Validate(hotcert.Content{CA: hotcert.Input{Name: "/ca/ca.crt", Data: tc.data}}); err != nil {
						t.Fatalf("Validate refuses a bundle ParseCertificates accepts: %v", err)
					}
					return
				}
				if hotcert.ReasonOf(err) != tc.reason || !strings.HasPrefix(err.Error(), "/ca/ca.crt: ") || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error %v, want reason %s naming the input and containing %q", err, tc.reason, tc.want)
				}
				if _, verr := hotcert.Validate(hotcert.Content{CA: hotcert.Input{Name: "/ca/ca.crt", Data: tc.data}}); hotcert.ReasonOf(verr) != tc.reason {
					t.Fatalf("Validate: %v, want reason %s as ParseCertificates", verr, tc.reason)
				}
				assertNoKeyMaterial(t, err.Error(), leaf)
			})
		}
	})

	t.Run("key files", func(t *testing.T) {
		second := root.MustIssue()
		sec1 := must(leaf.KeyPEMWithType(hotcerttest.KeyFormatSEC1))
		for _, tc := range []struct {
			name   string
			data   []byte
			reason hotcert.Reason
			want   string
		}{
			{name: "PKCS #8", data: leaf.KeyPEM},
			{name: "SEC 1 after EC PARAMETERS", data: cat(ecParams, sec1)},
			{name: "text around the key", data: cat([]byte("Bag Attributes\n    localKeyID: 01\n"), leaf.KeyPEM, []byte("\n"))},
			{name: "key followed by a cut BEGIN", data: cat(leaf.KeyPEM, []byte("-----BEGIN")), reason: hotcert.ReasonPEM, want: "starts with dashes"},
			{name: "two keys", data: cat(leaf.KeyPEM, second.KeyPEM), reason: hotcert.ReasonPEM, want: "holds 2 private keys"},
			{name: "certificate in key file", data: cat(leaf.KeyPEM, leaf.CertPEM), reason: hotcert.ReasonPEM, want: `PEM block 2 is a "CERTIFICATE", not a private key`},
			{name: "truncated key", data: hotcerttest.Truncate(leaf.KeyPEM), reason: hotcert.ReasonPEM, want: "PEM block 1 (a private key, line 1) is malformed or truncated"},
			{name: "garbled key before a good one", data: cat(garble(second.KeyPEM), leaf.KeyPEM), reason: hotcert.ReasonPEM, want: "PEM block 1"},
			{name: "encrypted PKCS #8", data: pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: []byte{1, 2}}), reason: hotcert.ReasonParse, want: "encrypted"},
			{name: "encrypted legacy", data: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED", "DEK-Info": "AES-128-CBC,00"}, Bytes: []byte{1, 2}}), reason: hotcert.ReasonParse, want: "encrypted"},
			{name: "unsupported key kind", data: pem.EncodeToMemory(&pem.Block{Type: "OPENSSH PRIVATE KEY", Bytes: []byte{1, 2}}), reason: hotcert.ReasonPEM, want: "not supported"},
			{name: "only parameters", data: ecParams, reason: hotcert.ReasonEmpty, want: "holds no private key"},
			{name: "empty", data: []byte("\n"), reason: hotcert.ReasonEmpty, want: "empty"},
			{name: "well-framed key that does not parse", data: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("nope")}), reason: hotcert.ReasonParse, want: "does not parse"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				in := hotcert.Input{Name: "/tls/tls.key", Data: tc.data}
				key, err := hotcert.ParsePrivateKey(in)
				if tc.reason == "" {
					if err != nil {
						t.Fatal(err)
					}
					if !key.Public().(*ecdsa.PublicKey).Equal(leaf.Cert.PublicKey) {
						t.Fatal("parsed another key")
					}
					if _, err := hotcert.Validate(hotcert.Content{Cert: hotcert.Input{Name: "/tls/tls.crt", Data: leaf.ChainPEM}, Key: in}); err != nil {
						t.Fatalf("Validate refuses a key ParsePrivateKey accepts: %v", err)
					}
					return
				}
				if hotcert.ReasonOf(err) != tc.reason || !strings.HasPrefix(err.Error(), "/tls/tls.key: ") || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error %v, want reason %s naming the input and containing %q", err, tc.reason, tc.want)
				}
				assertNoKeyMaterial(t, err.Error(), leaf, second)
			})
		}
	})

	t.Run("public keys", func(t *testing.T) {
		_, edKey, _ := ed25519.GenerateKey(nil)
		edDER := must(x509.MarshalPKIXPublicKey(edKey.Public()))
		ecDER := must(x509.MarshalPKIXPublicKey(leaf.Cert.PublicKey))
		pub := func(der []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}) }
		keys, err := hotcert.ParsePublicKeys(hotcert.Input{Name: "verify.pem", Data: cat([]byte("# current\n"), pub(ecDER), []byte("# next\n"), pub(edDER))})
		if err != nil || len(keys) != 2 {
			t.Fatalf("got %d keys, %v", len(keys), err)
		}
		if !keys[1].(ed25519.PublicKey).Equal(edKey.Public()) {
			t.Fatal("keys out of order")
		}
		for name, tc := range map[string]struct {
			data   []byte
			reason hotcert.Reason
		}{
			"truncated second key": {cat(pub(ecDER), hotcerttest.Truncate(pub(edDER))), hotcert.ReasonPEM},
			"certificate":          {cat(pub(ecDER), leaf.CertPEM), hotcert.ReasonPEM},
			"does not parse":       {pub([]byte("nope")), hotcert.ReasonParse},
			"none":                 {[]byte("\n"), hotcert.ReasonEmpty},
		} {
			if _, err := hotcert.ParsePublicKeys(hotcert.Input{Name: "verify.pem", Data: tc.data}); hotcert.ReasonOf(err) != tc.reason {
				t.Errorf("%s: %v, want reason %s", name, err, tc.reason)
			}
		}
	})
}

// TestDecodePEMKeepsParameterBlocks: DecodePEM returns every block, so a caller
// that sorts a combined file (chain and key) sees all of them.
func TestDecodePEMKeepsParameterBlocks(t *testing.T) {
	leaf := hotcerttest.MustNewCA().MustIssue()
	sec1 := must(leaf.KeyPEMWithType(hotcerttest.KeyFormatSEC1))
	data := bytes.Join([][]byte{leaf.CertPEM, []byte("-----BEGIN EC PARAMETERS-----\nBggqhkjOPQMBBw==\n-----END EC PARAMETERS-----\n"), sec1}, []byte("text\n"))
	blocks, err := hotcert.DecodePEM(hotcert.Input{Name: "combined.pem", Data: data})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, b := range blocks {
		types = append(types, b.Type)
	}
	if got := strings.Join(types, ","); got != "CERTIFICATE,EC PARAMETERS,EC PRIVATE KEY" {
		t.Fatalf("blocks %s", got)
	}
	if blocks, err := hotcert.DecodePEM(hotcert.Input{Name: "x", Data: []byte("no blocks")}); err != nil || len(blocks) != 0 {
		t.Fatalf("text only: %d blocks, %v", len(blocks), err)
	}
}

// TestIsEncryptedKey: the rule ParsePrivateKey refuses by, for a caller (the rollout
// controller) that lets an encrypted key pass unchecked.
func TestIsEncryptedKey(t *testing.T) {
	legacy := map[string]string{"Proc-Type": "4,ENCRYPTED", "DEK-Info": "AES-128-CBC,00"}
	for _, tc := range []struct {
		b    *pem.Block
		want bool
	}{
		{&pem.Block{Type: "ENCRYPTED PRIVATE KEY"}, true},
		{&pem.Block{Type: "RSA PRIVATE KEY", Headers: legacy}, true},
		{&pem.Block{Type: "EC PRIVATE KEY", Headers: legacy}, true},
		{&pem.Block{Type: "PRIVATE KEY"}, false},
		{&pem.Block{Type: "RSA PRIVATE KEY"}, false},
		{&pem.Block{Type: "CERTIFICATE", Headers: legacy}, false},
	} {
		if got := hotcert.IsEncryptedKey(tc.b); got != tc.want {
			t.Errorf("IsEncryptedKey(%s, %v) = %v", tc.b.Type, tc.b.Headers, got)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestPEMCutNeverShortens: a bundle, a chain or a key file read in the middle of a
// non-atomic write (cut at any byte) is either refused or holds every block it
// shows whole: a cut inside a block — inside the next block's BEGIN marker too,
// "-" to "-----BEGIN" — is never accepted as the shorter file. A cut that falls
// exactly after an END line leaves a complete, shorter file, which no reader can
// tell from one written that way; only those may be accepted.
func TestPEMCutNeverShortens(t *testing.T) {
	roots := []*hotcerttest.CA{hotcerttest.MustNewCA(), hotcerttest.MustNewCA(), hotcerttest.MustNewCA()}
	inter := roots[0].MustNewIntermediate()
	leaf := inter.MustIssue()
	sec1 := must(leaf.KeyPEMWithType(hotcerttest.KeyFormatSEC1))
	ecParams := []byte("-----BEGIN EC PARAMETERS-----\nBggqhkjOPQMBBw==\n-----END EC PARAMETERS-----\n")
	cas := func(data []byte) (int, error) {
		certs, err := hotcert.ParseCertificates(hotcert.Input{Name: "/ca/ca.crt", Data: data})
		return len(certs), err
	}
	for _, tc := range []struct {
		name  string
		data  []byte
		parse func([]byte) (int, error) // what is accepted: the number of blocks it holds
	}{
		{"CA bundle of 3 (ParseCertificates)", hotcerttest.BundlePEM(roots...), cas},
		{"CA bundle of 2 (Validate)", hotcerttest.BundlePEM(roots[:2]...), func(data []byte) (int, error) {
			m, err := hotcert.Validate(hotcert.Content{CA: hotcert.Input{Name: "/ca/ca.crt", Data: data}})
			if err != nil {
				return 0, err
			}
			return len(m.TrustCertificates()), nil
		}},
		{"certificate chain (Validate)", leaf.ChainPEM, func(data []byte) (int, error) {
			m, err := hotcert.Validate(hotcert.Content{Cert: hotcert.Input{Name: "/tls/tls.crt", Data: data}, Key: hotcert.Input{Name: "/tls/tls.key", Data: leaf.KeyPEM}})
			if err != nil {
				return 0, err
			}
			return len(m.Chain()), nil
		}},
		{"key file with EC PARAMETERS (ParsePrivateKey)", cat(ecParams, sec1), func(data []byte) (int, error) {
			if _, err := hotcert.ParsePrivateKey(hotcert.Input{Name: "/tls/tls.key", Data: data}); err != nil {
				return 0, err
			}
			return 2, nil // the parameters block and the key
		}},
		{"blocks (DecodePEM)", hotcerttest.BundlePEM(roots[:2]...), func(data []byte) (int, error) {
			blocks, err := hotcert.DecodePEM(hotcert.Input{Name: "/ca/ca.crt", Data: data})
			return len(blocks), err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if n, err := tc.parse(tc.data); err != nil || n != bytes.Count(tc.data, []byte("-----END ")) {
				t.Fatalf("the whole file: %d blocks, %v", n, err)
			}
			accepted := 0
			for n := 1; n < len(tc.data); n++ {
				cut := tc.data[:n]
				got, err := tc.parse(cut)
				if err != nil {
					if hotcert.ReasonOf(err) == "" {
						t.Fatalf("cut at %d: error without a reason: %v", n, err)
					}
					continue
				}
				accepted++
				if !endsAfterEND(cut) || got != bytes.Count(cut, []byte("-----END ")) {
					t.Errorf("cut at byte %d of %d (ending %q) accepted with %d blocks: a cut block was left out", n, len(tc.data), tail(cut), got)
				}
			}
			// Each block boundary but the last allows two whole cuts (after the END
			// line's dashes, and after its newline), and the last one (the whole
			// file without its final newline).
			if want := 2*(bytes.Count(tc.data, []byte("-----END "))-1) + 1; accepted > want {
				t.Errorf("%d cut positions accepted, want at most %d (the block boundaries)", accepted, want)
			}
		})
	}

	// The cuts the PEM decoder alone would take for text: every prefix of the next
	// BEGIN line up to its space, after a whole first certificate.
	a, b := hotcerttest.BundlePEM(roots[0]), hotcerttest.BundlePEM(roots[1])
	for n := 1; n <= len("-----BEGIN"); n++ {
		data := cat(a, b[:n])
		if _, err := hotcert.ParseCertificates(hotcert.Input{Name: "/ca/ca.crt", Data: data}); hotcert.ReasonOf(err) != hotcert.ReasonPEM || !strings.Contains(err.Error(), "line ") {
			t.Errorf("bundle followed by %q: %v, want a pem error naming the line", b[:n], err)
		}
	}

	// Through the reloader: New refuses the cut bundle, and a running reloader
	// keeps serving the whole one.
	whole := hotcerttest.BundlePEM(roots[:2]...)
	cutAt := cat(a, b[:len("-----BEGIN")])
	if _, err := hotcert.New(context.Background(), newMemSource(hotcert.Content{CA: hotcert.Input{Name: "/ca/ca.crt", Data: cutAt}})); hotcert.ReasonOf(err) != hotcert.ReasonPEM {
		t.Fatalf("New with a bundle cut inside its second BEGIN: %v, want refused (pem)", err)
	}
	h := startReloader(t, hotcert.Content{CA: hotcert.Input{Name: "/ca/ca.crt", Data: whole}}, hotcert.WithSettle(0))
	h.src.Set(hotcert.Content{CA: hotcert.Input{Name: "/ca/ca.crt", Data: cat(whole, b[:1])}}, nil)
	testutil.WaitFor(t, "the cut bundle to be refused", func() bool { return len(h.obs.Failures()) == 1 })
	if got := hotcert.ReasonOf(h.obs.Failures()[0]); got != hotcert.ReasonPEM {
		t.Fatalf("refused as %s, want pem", got)
	}
	if n := len(h.r.Current().TrustCertificates()); n != 2 {
		t.Fatalf("serving %d CAs after a cut write, want the whole bundle's 2", n)
	}
}

// endsAfterEND reports whether data ends with a whole END line (and its line end).
func endsAfterEND(data []byte) bool {
	trimmed := bytes.TrimRight(data, "\r\n")
	if len(data)-len(trimmed) > 2 {
		return false
	}
	line := trimmed[bytes.LastIndexByte(trimmed, '\n')+1:]
	return bytes.HasPrefix(line, []byte("-----END ")) && bytes.HasSuffix(line, []byte("-----"))
}

func tail(b []byte) []byte { return b[max(0, len(b)-12):] }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
