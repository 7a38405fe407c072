package jwtkeys

import (
	"strings"
	"testing"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
)

func TestValidate(t *testing.T) {
	ec, ec2 := newKey(t, ES256, 0), newKey(t, ES256, 1)
	secret, _ := GenerateHMACSecret()
	p384 := hotcerttest.MustNewCA().MustIssue(hotcerttest.WithKeyType(hotcerttest.ECDSAP384))
	rsa1024 := hotcerttest.MustNewCA().MustIssue(hotcerttest.WithKeyType(hotcerttest.RSA1024))
	withVerify := func(data []byte) Content {
		c := signing(ec)
		c.VerificationKeys = hotcert.Input{Name: "verify.pem", Data: data}
		return c
	}
	sk := func(data []byte) Content { return Content{SigningKey: hotcert.Input{Name: "signing.key", Data: data}} }
	both := signing(ec)
	both.HMACSecrets = secrets(secret).HMACSecrets

	for _, tc := range []struct {
		name   string
		c      Content
		reason hotcert.Reason
		input  string
	}{
		{"nothing signs", Content{Source: "files x"}, hotcert.ReasonIncomplete, "files x"},
		{"signing key and secrets", both, hotcert.ReasonIncomplete, "signing.key"},
		{"empty signing key", sk([]byte("\n")), hotcert.ReasonEmpty, "signing.key"},
		{"truncated signing key", sk(hotcerttest.Truncate(ec.private)), hotcert.ReasonPEM, "signing.key"},
		{"two private keys", sk(append(append([]byte{}, ec.private...), ec2.private...)), hotcert.ReasonPEM, "signing.key"},
		{"public key as signing key", sk(ec.public), hotcert.ReasonPEM, "signing.key"},
		{"encrypted key", sk([]byte("-----BEGIN PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00\n\nAAAA\n-----END PRIVATE KEY-----\n")), hotcert.ReasonParse, "signing.key"},
		{"BEGIN inside a line", sk(append([]byte("key: "), ec.private...)), hotcert.ReasonPEM, "signing.key"},
		{"P-384", sk(p384.KeyPEM), hotcert.ReasonParse, "signing.key"},
		{"RSA 1024", sk(rsa1024.KeyPEM), hotcert.ReasonWeakKey, "signing.key"},
		{"garbage DER", sk([]byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")), hotcert.ReasonParse, "signing.key"},
		// A verify.pem whose last key is cut is rejected, not silently shortened.
		{"truncated second verification key", withVerify(append(append([]byte{}, ec2.public...), hotcerttest.Truncate(ec.public)...)), hotcert.ReasonPEM, "verify.pem"},
		{"certificate in verify.pem", withVerify(p384.CertPEM), hotcert.ReasonPEM, "verify.pem"},
		{"private key in verify.pem", withVerify(ec2.private), hotcert.ReasonPEM, "verify.pem"},
		{"only text in verify.pem", withVerify([]byte("keys go here\n")), hotcert.ReasonEmpty, "verify.pem"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Validate(tc.c)
			if err == nil {
				t.Fatal("accepted")
			}
			if r := hotcert.ReasonOf(err); r != tc.reason || !strings.HasPrefix(err.Error(), tc.input) {
				t.Fatalf("error %q (reason %s), want reason %s naming %s", err, r, tc.reason, tc.input)
			}
			if leaks(err.Error(), ec.private, ec2.private, p384.KeyPEM, rsa1024.KeyPEM) {
				t.Fatalf("error %q leaks key material", err)
			}
		})
	}

	// Every private key encoding the library reads is accepted; empty verify.pem is fine.
	rsaLeaf := hotcerttest.MustNewCA().MustIssue(hotcerttest.WithKeyType(hotcerttest.RSA2048))
	pkcs1, _ := rsaLeaf.KeyPEMWithType(hotcerttest.KeyFormatPKCS1)
	ecLeaf := hotcerttest.MustNewCA().MustIssue()
	sec1, _ := ecLeaf.KeyPEMWithType(hotcerttest.KeyFormatSEC1)
	edLeaf := hotcerttest.MustNewCA().MustIssue(hotcerttest.WithKeyType(hotcerttest.Ed25519))
	for name, tc := range map[string]struct {
		c   Content
		alg string
	}{
		"PKCS#1 RSA":         {sk(pkcs1), RS256},
		"SEC 1 EC":           {sk(sec1), ES256},
		"PKCS#8 Ed25519":     {sk(edLeaf.KeyPEM), EdDSA},
		"empty verify.pem":   {withVerify([]byte("\n")), ES256},
		"signer also listed": {withVerify(append(append([]byte{}, ec.public...), ec2.public...)), ES256},
		// hotcert's one PEM grammar: text outside blocks is ignored, parameter blocks
		// are skipped (openssl ecparam -genkey writes EC PARAMETERS before the key).
		"text before the key": {sk(append([]byte("key:\n"), ec.private...)), ES256},
		"openssl ecparam key": {sk(append([]byte("-----BEGIN EC PARAMETERS-----\nBggqhkjOPQMBBw==\n-----END EC PARAMETERS-----\n"), sec1...)), ES256},
		"text between keys":   {withVerify([]byte(string(ec2.public) + "junk\n" + string(ec.public))), ES256},
	} {
		m, err := Validate(tc.c)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if m.Algorithm() != tc.alg {
			t.Fatalf("%s: alg %s, want %s", name, m.Algorithm(), tc.alg)
		}
		if name == "signer also listed" && (len(m.Keys()) != 2 || m.Keys()[1].ID != ec2.kid) {
			t.Fatalf("listed keys %+v: the signer must not be listed twice", m.Keys())
		}
	}
}

func TestContentHash(t *testing.T) {
	a := Content{SigningKey: hotcert.Input{Name: "a", Data: []byte("xy")}}
	b := Content{SigningKey: hotcert.Input{Name: "other", Data: []byte("xy")}}
	c := Content{HMACSecrets: hotcert.Input{Name: "a", Data: []byte("xy")}}
	d := Content{SigningKey: hotcert.Input{Name: "a", Data: []byte("x")}, VerificationKeys: hotcert.Input{Name: "v", Data: []byte("y")}}
	if a.Hash() != b.Hash() {
		t.Fatal("names changed the hash")
	}
	if a.Hash() == c.Hash() || a.Hash() == d.Hash() {
		t.Fatal("moving bytes between parts kept the hash")
	}
}
