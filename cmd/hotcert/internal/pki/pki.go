// Package pki makes test TLS material from the command line (`hotcert pki`): a CA
// kept in a directory (ca.crt, ca.key), server and client certificates issued by
// it with chosen names, usages and validity (expired and not yet valid included),
// and CA bundles, each written as a kubelet-style volume (files behind a ..data
// symlink swapped in one rename) so that writing again is a rotation, exactly as
// the kubelet updates a mounted Secret. It is built on hotcerttest's PKI and
// AtomicWriter: the same material and the same volume layout hotcert's own tests
// use. It is for tests, demos and runbooks, not for production certificates.
package pki

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
)

// Names of the files pki writes.
const (
	CACertName = "ca.crt" // a CA's certificate, and the bundle file of a volume
	CAKeyName  = "ca.key" // a CA's private key (mode 0600)
	CertName   = "tls.crt"
	KeyName    = "tls.key"
)

// NewCA creates a root CA and writes it to dir (ca.crt, ca.key). It refuses to
// overwrite a CA already in dir unless force is set.
func NewCA(dir string, force bool, opts ...hotcerttest.Option) (*hotcerttest.CA, error) {
	crt, key := filepath.Join(dir, CACertName), filepath.Join(dir, CAKeyName)
	if !force {
		if _, err := os.Stat(crt); err == nil {
			return nil, fmt.Errorf("%s already holds a CA (%s): give another directory, or --force to replace it", dir, CACertName)
		}
	}
	ca, err := hotcerttest.NewCA(opts...)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(key, ca.KeyPEM, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(crt, ca.CertPEM, 0o644); err != nil {
		return nil, err
	}
	return ca, nil
}

// LoadCA reads the CA NewCA wrote to dir.
func LoadCA(dir string) (*hotcerttest.CA, error) {
	crtPEM, err := os.ReadFile(filepath.Join(dir, CACertName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s holds no CA (no %s): make one with hotcert pki ca --dir %s", dir, CACertName, dir)
	}
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, CAKeyName))
	if err != nil {
		return nil, err
	}
	certs, err := hotcert.ParseCertificates(hotcert.Input{Name: filepath.Join(dir, CACertName), Data: crtPEM})
	if err != nil {
		return nil, err
	}
	if len(certs) != 1 || !certs[0].IsCA {
		return nil, fmt.Errorf("%s: want exactly one CA certificate", filepath.Join(dir, CACertName))
	}
	key, err := hotcert.ParsePrivateKey(hotcert.Input{Name: filepath.Join(dir, CAKeyName), Data: keyPEM})
	if err != nil {
		return nil, err
	}
	return &hotcerttest.CA{Cert: certs[0], Key: key, CertPEM: crtPEM, KeyPEM: keyPEM}, nil
}

// Issue issues a certificate with ca and writes it to the volume dir: tls.crt (the
// chain), tls.key and ca.crt (ca's certificate), in one kubelet-style swap. Writing
// into a volume that already holds a certificate rotates it.
func Issue(ca *hotcerttest.CA, dir string, opts ...hotcerttest.Option) (*hotcerttest.Leaf, error) {
	leaf, err := ca.Issue(opts...)
	if err != nil {
		return nil, err
	}
	if err := WriteVolume(dir, map[string][]byte{CertName: leaf.ChainPEM, KeyName: leaf.KeyPEM, CACertName: ca.Root().CertPEM}); err != nil {
		return nil, err
	}
	return leaf, nil
}

// Bundle writes the certificates of cas, in order, as ca.crt of the volume dir.
func Bundle(dir string, cas ...*hotcerttest.CA) error {
	return WriteVolume(dir, map[string][]byte{CACertName: hotcerttest.BundlePEM(cas...)})
}

// WriteVolume writes files into dir as the kubelet updates a Secret volume.
func WriteVolume(dir string, files map[string][]byte) error {
	w, err := hotcerttest.NewAtomicWriter(dir)
	if err != nil {
		return err
	}
	_, err = w.Write(files)
	return err
}

// Usages maps the names --usage takes to extended key usages.
var Usages = map[string][]x509.ExtKeyUsage{
	"server": {x509.ExtKeyUsageServerAuth},
	"client": {x509.ExtKeyUsageClientAuth},
	"both":   {x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
}
