package hotcerttest_test

import (
	"bytes"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hotcert/hotcert/hotcerttest"
)

// Example builds a root CA, an intermediate and a server leaf, projects the
// leaf into a directory the way the kubelet projects a kubernetes.io/tls
// Secret, and rotates it.
func Example() {
	root := hotcerttest.MustNewCA()
	inter := root.MustNewIntermediate()
	leaf := inter.MustIssue(hotcerttest.WithDNSNames("server.example.svc"))

	// The chain verifies against the root alone.
	intermediates := x509.NewCertPool()
	intermediates.AddCert(inter.Cert)
	_, err := leaf.Cert.Verify(x509.VerifyOptions{
		DNSName:       "server.example.svc",
		Roots:         hotcerttest.Pool(root),
		Intermediates: intermediates,
	})
	fmt.Println("verify:", err)

	dir, err := os.MkdirTemp("", "hotcerttest-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	w := hotcerttest.MustNewAtomicWriter(dir)
	secret := map[string][]byte{"tls.crt": leaf.ChainPEM, "tls.key": leaf.KeyPEM, "ca.crt": root.CertPEM}
	fmt.Println("first write changed:", w.MustWrite(secret))
	fmt.Println("same write changed:", w.MustWrite(secret))

	next := inter.MustIssue(hotcerttest.WithDNSNames("server.example.svc"))
	secret["tls.crt"], secret["tls.key"] = next.ChainPEM, next.KeyPEM
	fmt.Println("rotation changed:", w.MustWrite(secret))

	crt, _ := os.ReadFile(filepath.Join(dir, "tls.crt"))
	link, _ := os.Readlink(filepath.Join(dir, "tls.crt"))
	fmt.Println("tls.crt is the new chain:", bytes.Equal(crt, next.ChainPEM))
	fmt.Println("tls.crt ->", link)
	// Output:
	// verify: <nil>
	// first write changed: true
	// same write changed: false
	// rotation changed: true
	// tls.crt is the new chain: true
	// tls.crt -> ..data/tls.crt
}
