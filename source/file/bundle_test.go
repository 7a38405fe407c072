package file_test

import (
	"bytes"
	"context"
	"encoding/pem"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/source/file"
)

// podCertificateVolume is a projected volume as the kubelet writes it for a pod
// with a podCertificate source and a clusterTrustBundle source: every file of the
// volume in one directory, swapped together through "..data".
//
//	volumes:
//	- name: identity
//	  projected:
//	    sources:
//	    - podCertificate:
//	        signerName: example.com/serving
//	        keyType: ECDSAP256
//	        credentialBundlePath: credentialbundle.pem   # or keyPath + certificateChainPath
//	    - clusterTrustBundle:
//	        signerName: example.com/serving
//	        path: ca.crt
func podCertificateVolume(f *fixture, files map[string][]byte) {
	f.t.Helper()
	if _, err := f.tlsW.Write(files); err != nil {
		f.t.Fatal(err)
	}
}

func TestCredentialBundleInEitherOrder(t *testing.T) {
	for _, keyFirst := range []bool{true, false} {
		name := "key then chain (as the kubelet writes it)"
		if !keyFirst {
			name = "chain then key"
		}
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			bundle := func(l *hotcerttest.Leaf) []byte {
				if keyFirst {
					return append(append([]byte{}, l.KeyPEM...), l.ChainPEM...)
				}
				return append(append([]byte{}, l.ChainPEM...), l.KeyPEM...)
			}
			path := filepath.Join(f.tlsDir, "credentialbundle.pem")
			write := func(data []byte) {
				podCertificateVolume(f, map[string][]byte{"credentialbundle.pem": data, "ca.crt": hotcerttest.BundlePEM(f.ca)})
			}
			a := f.ca.MustNewIntermediate().MustIssue() // the chain holds the leaf and an intermediate
			f.leaves = append(f.leaves, a)
			write(bundle(a))
			src, err := file.New(file.WithCredentialBundle(path), file.WithCA(filepath.Join(f.tlsDir, "ca.crt")), file.WithRewatchInterval(20*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			f.start(src, hotcert.WithValidation(hotcert.WithChainToOwnTrust()))
			f.waitServing(a)
			if got := len(f.r.Current().Chain()); got != 2 {
				t.Fatalf("chain of %d certificates, want leaf and intermediate", got)
			}

			// The kubelet rotates the pod certificate: served.
			b := f.leaf()
			write(bundle(b))
			f.waitServing(b)

			// A key that is not the leaf's: refused once, naming the file; b keeps serving.
			c, other := f.leaf(), f.leaf()
			bad := append(append([]byte{}, other.KeyPEM...), c.ChainPEM...)
			write(bad)
			testutil.WaitFor(t, "the failure to be reported", func() bool { return f.failures() == 1 })
			err = f.obs.Failures()[0]
			if hotcert.ReasonOf(err) != hotcert.ReasonKeyMismatch || !strings.HasPrefix(err.Error(), path) {
				t.Fatalf("failure %v, want key_mismatch naming %s", err, path)
			}
			if !f.serving(b) {
				t.Fatal("a bad bundle replaced the last good material")
			}
			_ = f.r.Reload(context.Background())
			if f.failures() != 1 || f.logs.Count("TLS certificate reload failed") != 1 {
				t.Fatalf("failures %d, lines %d; want 1 and 1", f.failures(), f.logs.Count("TLS certificate reload failed"))
			}
			write(bundle(c))
			f.waitServing(c)
		})
	}
}

func TestCredentialBundleBadInputAtStartup(t *testing.T) {
	f := newFixture(t)
	l := f.leaf()
	path := filepath.Join(f.tlsDir, "credentialbundle.pem")
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	encrypted := pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: []byte{1, 2}})
	// Each error speaks of the credential bundle the user configured — never of a
	// key file — says what is wrong, and names the file once.
	for name, tc := range map[string]struct {
		data   []byte
		reason hotcert.Reason
		want   string // the error after "hotcert: <path>: "
	}{
		"chain only":         {l.ChainPEM, hotcert.ReasonIncomplete, "credential bundle holds a certificate chain but no private key"},
		"key only":           {l.KeyPEM, hotcert.ReasonIncomplete, "credential bundle holds a private key but no certificate"},
		"empty":              {nil, hotcert.ReasonEmpty, "credential bundle holds no private key and no certificate"},
		"truncated key":      {cat(hotcerttest.Truncate(l.KeyPEM), l.ChainPEM), hotcert.ReasonPEM, "PEM block 1 (a private key, line 1) is malformed or truncated"},
		"two keys":           {cat(l.KeyPEM, f.leaf().KeyPEM, l.ChainPEM), hotcert.ReasonPEM, "credential bundle holds 2 private keys; it holds exactly one, the key of its leaf certificate"},
		"encrypted key last": {cat(l.ChainPEM, encrypted), hotcert.ReasonParse, "credential bundle holds an encrypted private key (PEM block 2); an unencrypted key is needed"},
		"another key":        {cat(f.leaf().KeyPEM, l.ChainPEM), hotcert.ReasonKeyMismatch, "private key does not match the leaf certificate (CN=localhost serial=" + hotcert.FormatSerial(l.Cert.SerialNumber) + ")"},
		"a CSR in the file":  {cat(l.KeyPEM, []byte("-----BEGIN CERTIFICATE REQUEST-----\nMA==\n-----END CERTIFICATE REQUEST-----\n")), hotcert.ReasonPEM, `credential bundle holds a private key and its certificate chain, but PEM block 2 is a "CERTIFICATE REQUEST"`},
	} {
		podCertificateVolume(f, map[string][]byte{"credentialbundle.pem": tc.data})
		src, err := file.New(file.WithCredentialBundle(path))
		if err != nil {
			t.Fatal(err)
		}
		_, err = hotcert.New(context.Background(), src)
		if got, want := fmt.Sprint(err), "hotcert: "+path+": "+tc.want; hotcert.ReasonOf(err) != tc.reason || got != want {
			t.Errorf("%s: reason %s\n got %q\nwant %q (reason %s)", name, hotcert.ReasonOf(err), got, want, tc.reason)
		}
		if strings.Contains(err.Error(), "key file") {
			t.Errorf("%s: %q speaks of a key file; the user configured a credential bundle", name, err)
		}
		if hotcerttest.ContainsKeyMaterial(err.Error(), f.leaves...) {
			t.Errorf("%s: error contains key material", name)
		}
	}
	if _, err := file.New(file.WithCredentialBundle(path), file.WithKeyPair("/c", "/k")); err == nil {
		t.Fatal("a credential bundle and a key pair accepted together")
	}
}

// TestNewSaysWhichOptionIsIncomplete: a Source that cannot read anything says which
// option is missing what, naming the option and the file given.
func TestNewSaysWhichOptionIsIncomplete(t *testing.T) {
	for _, tc := range []struct {
		opts []file.Option
		want string
	}{
		{[]file.Option{file.WithKeyPair("/tls/tls.crt", "")}, "file: WithKeyPair: certificate file /tls/tls.crt is given without its key file (a certificate is served with its private key)"},
		{[]file.Option{file.WithKeyPair("", "/tls/tls.key")}, "file: WithKeyPair: key file /tls/tls.key is given without its certificate file (a key is served with its certificate chain)"},
		{[]file.Option{file.WithKeyPair("/c", "/k"), file.WithCredentialBundle("/b")}, "file: WithKeyPair and WithCredentialBundle both give the identity: give one of them"},
		{nil, "file: nothing to read: give WithKeyPair or WithCredentialBundle (the identity), WithCA (the CA bundle), or both"},
	} {
		if _, err := file.New(tc.opts...); fmt.Sprint(err) != tc.want {
			t.Errorf("got  %v\nwant %s", err, tc.want)
		}
	}
}

// TestPodCertificateSeparateFiles: the volume's keyPath and certificateChainPath
// layout, with the trust bundle projected next to them, rotated by the kubelet.
func TestPodCertificateSeparateFiles(t *testing.T) {
	f := newFixture(t)
	write := func(l *hotcerttest.Leaf, cas ...*hotcerttest.CA) {
		podCertificateVolume(f, map[string][]byte{"key.pem": l.KeyPEM, "chain.pem": l.ChainPEM, "ca.crt": hotcerttest.BundlePEM(cas...)})
	}
	a := f.leaf()
	write(a, f.ca)
	src, err := file.New(file.WithKeyPair(filepath.Join(f.tlsDir, "chain.pem"), filepath.Join(f.tlsDir, "key.pem")),
		file.WithCA(filepath.Join(f.tlsDir, "ca.crt")), file.WithRewatchInterval(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	f.start(src, hotcert.WithValidation(hotcert.WithChainToOwnTrust()))
	f.waitServing(a)
	next := hotcerttest.MustNewCA()
	b := f.leaf()
	write(b, f.ca, next)
	f.waitServing(b)
	if n := len(f.r.Current().TrustCertificates()); n != 2 || f.failures() != 0 {
		t.Fatalf("trust %d CAs, failures %d; want 2 and 0", n, f.failures())
	}
}
