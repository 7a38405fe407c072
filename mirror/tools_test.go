package mirror_test

import (
	"bytes"
	"encoding/pem"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
)

// run runs a tool that hack/tools.sh installs and returns its output.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Fatalf("%s not found: run hack/tools.sh (it installs openssl and Debian's openjdk-17-jdk-headless), or make test", name)
	}
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestRealToolsReadTheMirror: keytool lists the keystore's key entry with the
// leaf and the truststore's CAs as trusted-certificate entries, and openssl
// pkcs12 reads both with the modern algorithms (AES-256-CBC, PBKDF2 with
// HMAC-SHA-256, a SHA-256 MAC) and the Java trust attribute.
func TestRealToolsReadTheMirror(t *testing.T) {
	f := newFixture(t)
	ca2 := hotcerttest.MustNewCA(hotcerttest.WithCommonName(f.ca.Cert.Subject.CommonName)) // a rotation's new CA, same subject
	next := f.ca.MustNewIntermediate().MustIssue()                                         // a chain of two
	f.secret.MustWrite(f.payload(next, f.ca, ca2))
	waitFiles(t, f, next, f.ca, ca2)
	ks, ts := filepath.Join(f.out, "keystore.p12"), filepath.Join(f.out, "truststore.p12")
	pw := "pass:s3cret-one"

	out := run(t, "keytool", "-list", "-v", "-storetype", "PKCS12", "-keystore", ks, "-storepass", "s3cret-one")
	if !strings.Contains(out, "Your keystore contains 1 entry") || !strings.Contains(out, "Entry type: PrivateKeyEntry") || !strings.Contains(out, "Certificate chain length: 2") ||
		!strings.Contains(out, "SHA256: "+hotcert.FingerprintOf(next.Cert).Colon()) {
		t.Errorf("keytool -list keystore.p12: want one PrivateKeyEntry with the leaf's fingerprint:\n%s", out)
	}
	out = run(t, "keytool", "-list", "-storetype", "PKCS12", "-keystore", ts, "-storepass", "s3cret-one")
	for _, ca := range []*hotcerttest.CA{f.ca, ca2} {
		fp := hotcert.FingerprintOf(ca.Cert)
		if !strings.Contains(out, "ca-"+fp.String()[:16]+", ") || !strings.Contains(out, "(SHA-256): "+fp.Colon()) {
			t.Errorf("keytool -list truststore.p12 does not list %s:\n%s", ca.Cert.Subject, out)
		}
	}
	if n := strings.Count(out, "trustedCertEntry"); n != 2 {
		t.Errorf("keytool lists %d trustedCertEntry, want 2:\n%s", n, out)
	}

	for _, file := range []string{ks, ts} {
		info := run(t, "openssl", "pkcs12", "-info", "-in", file, "-passin", pw, "-noout")
		for _, want := range []string{"MAC: sha256", "PBES2, PBKDF2, AES-256-CBC", "PRF hmacWithSHA256"} {
			if !strings.Contains(info, want) {
				t.Errorf("openssl pkcs12 -info %s: no %q:\n%s", filepath.Base(file), want, info)
			}
		}
	}
	certs := run(t, "openssl", "pkcs12", "-in", ks, "-passin", pw, "-nokeys", "-clcerts")
	if b, _ := pem.Decode([]byte(certs[strings.Index(certs, "-----BEGIN"):])); b == nil || !bytes.Equal(b.Bytes, next.Cert.Raw) {
		t.Errorf("openssl pkcs12 reads another leaf from keystore.p12:\n%s", certs)
	}
	trust := run(t, "openssl", "pkcs12", "-in", ts, "-passin", pw, "-nokeys")
	if n := strings.Count(trust, "2.16.840.1.113894.746875.1.1"); n != 2 {
		t.Errorf("openssl shows the Java trust attribute on %d bags, want 2:\n%s", n, trust)
	}
}

// waitFiles waits until the keystore holds leaf and the truststore cas.
func waitFiles(t *testing.T, f *fixture, leaf *hotcerttest.Leaf, cas ...*hotcerttest.CA) {
	t.Helper()
	want := hotcerttest.BundlePEM(cas...)
	testutil.WaitFor(t, "the mirror to hold the rotation", func() bool {
		l, err := f.keystoreLeaf("s3cret-one")
		return err == nil && l.Equal(leaf.Cert) && bytes.Equal(f.read("ca.crt"), want) && f.m.Status().InSync
	})
}
