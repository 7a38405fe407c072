package hotcerttest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

const (
	defaultLeafLifetime = 24 * time.Hour
	defaultCALifetime   = 10 * 365 * 24 * time.Hour
	backdate            = time.Minute
)

// CA is a certificate authority: a self-signed root (Parent == nil) or an
// intermediate signed by Parent.
type CA struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte // one CERTIFICATE block
	KeyPEM  []byte // PKCS#8 "PRIVATE KEY" block
	Parent  *CA    // nil for a root
}

// Leaf is an end-entity certificate with its key, issued by Issuer.
type Leaf struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte // the leaf only
	KeyPEM  []byte // PKCS#8 "PRIVATE KEY" block
	// ChainPEM is the leaf followed by every intermediate up to, excluding,
	// the root: what a server presents and what tls.X509KeyPair expects.
	ChainPEM []byte
	Issuer   *CA
}

// NewCA creates a self-signed root CA: BasicConstraints CA, key usage
// CertSign|CRLSign, common name "hotcert test CA <random>", valid from one
// minute ago for 10 years, unless options say otherwise.
func NewCA(opts ...Option) (*CA, error) {
	cert, key, err := create(nil, "hotcert test CA ", newConfig(opts))
	if err != nil {
		return nil, fmt.Errorf("hotcerttest: new CA: %w", err)
	}
	return newCA(cert, key, nil)
}

// MustNewCA is like [NewCA] but panics on error.
func MustNewCA(opts ...Option) *CA {
	return must(NewCA(opts...))
}

// NewIntermediate creates an intermediate CA signed by ca, with the same
// defaults as [NewCA] and the common name "hotcert test intermediate CA <random>".
func (ca *CA) NewIntermediate(opts ...Option) (*CA, error) {
	cert, key, err := create(ca, "hotcert test intermediate CA ", newConfig(opts))
	if err != nil {
		return nil, fmt.Errorf("hotcerttest: new intermediate: %w", err)
	}
	return newCA(cert, key, ca)
}

// MustNewIntermediate is like [CA.NewIntermediate] but panics on error.
func (ca *CA) MustNewIntermediate(opts ...Option) *CA {
	return must(ca.NewIntermediate(opts...))
}

// Issue creates a leaf certificate signed by ca. Defaults: common name and DNS
// name "localhost", IP addresses 127.0.0.1 and ::1, extended key usages
// serverAuth and clientAuth, key usage DigitalSignature (plus KeyEncipherment
// for RSA), valid from one minute ago for 24 hours.
func (ca *CA) Issue(opts ...Option) (*Leaf, error) {
	cert, key, err := create(ca, "", newConfig(opts))
	if err != nil {
		return nil, fmt.Errorf("hotcerttest: issue: %w", err)
	}
	l := &Leaf{Cert: cert, Key: key, CertPEM: certPEM(cert), Issuer: ca}
	if l.KeyPEM, err = encodeKeyPEM(key, KeyFormatPKCS8); err != nil {
		return nil, fmt.Errorf("hotcerttest: issue: %w", err)
	}
	l.ChainPEM = append([]byte(nil), l.CertPEM...)
	for _, c := range l.intermediates() {
		l.ChainPEM = append(l.ChainPEM, c.CertPEM...)
	}
	return l, nil
}

// MustIssue is like [CA.Issue] but panics on error.
func (ca *CA) MustIssue(opts ...Option) *Leaf {
	return must(ca.Issue(opts...))
}

// Root returns the root of ca's chain (ca itself for a root).
func (ca *CA) Root() *CA {
	for ca.Parent != nil {
		ca = ca.Parent
	}
	return ca
}

// BundlePEM concatenates the CERTIFICATE PEM blocks of cas in the order given,
// as in a CA bundle file such as a ConfigMap's ca.crt.
func BundlePEM(cas ...*CA) []byte {
	var b []byte
	for _, ca := range cas {
		b = append(b, ca.CertPEM...)
	}
	return b
}

// Pool returns a new x509.CertPool holding the certificates of cas.
func Pool(cas ...*CA) *x509.CertPool {
	p := x509.NewCertPool()
	for _, ca := range cas {
		p.AddCert(ca.Cert)
	}
	return p
}

// TLSCertificate returns the leaf, its intermediates and its key as a
// tls.Certificate with Leaf set.
func (l *Leaf) TLSCertificate() tls.Certificate {
	chain := [][]byte{l.Cert.Raw}
	for _, c := range l.intermediates() {
		chain = append(chain, c.Cert.Raw)
	}
	return tls.Certificate{Certificate: chain, PrivateKey: l.Key, Leaf: l.Cert}
}

// KeyPEMWithType encodes the leaf's key in the given format. [KeyFormatPKCS1]
// works only for RSA keys and [KeyFormatSEC1] only for ECDSA keys.
func (l *Leaf) KeyPEMWithType(format KeyFormat) ([]byte, error) {
	b, err := encodeKeyPEM(l.Key, format)
	if err != nil {
		return nil, fmt.Errorf("hotcerttest: encode key: %w", err)
	}
	return b, nil
}

// intermediates returns the issuers of l below the root, nearest first.
func (l *Leaf) intermediates() []*CA {
	var out []*CA
	for c := l.Issuer; c != nil && c.Parent != nil; c = c.Parent {
		out = append(out, c)
	}
	return out
}

func newCA(cert *x509.Certificate, key crypto.Signer, parent *CA) (*CA, error) {
	keyPEM, err := encodeKeyPEM(key, KeyFormatPKCS8)
	if err != nil {
		return nil, fmt.Errorf("hotcerttest: new CA: %w", err)
	}
	return &CA{Cert: cert, Key: key, CertPEM: certPEM(cert), KeyPEM: keyPEM, Parent: parent}, nil
}

// create generates a key and a certificate signed by parent, or self-signed
// when parent is nil. cnPrefix is non-empty for CAs: it selects the CA
// defaults and prefixes the random default common name.
func create(parent *CA, cnPrefix string, c *config) (*x509.Certificate, crypto.Signer, error) {
	leaf := cnPrefix == ""
	key, err := generateKey(c.keyType)
	if err != nil {
		return nil, nil, err
	}
	ski, err := subjectKeyID(key.Public())
	if err != nil {
		return nil, nil, err
	}
	serial := c.serial
	if serial == nil {
		max := new(big.Int).Lsh(big.NewInt(1), 128)
		if serial, err = rand.Int(rand.Reader, max.Sub(max, big.NewInt(1))); err != nil {
			return nil, nil, err
		}
		serial.Add(serial, big.NewInt(1))
	}
	notBefore, notAfter := c.notBefore, c.notAfter
	if !c.validitySet {
		lifetime := c.lifetime
		if lifetime == 0 {
			lifetime = defaultCALifetime
			if leaf {
				lifetime = defaultLeafLifetime
			}
		}
		now := c.now()
		notBefore, notAfter = now.Add(-backdate), now.Add(lifetime)
	}
	if !notAfter.After(notBefore) {
		return nil, nil, fmt.Errorf("NotAfter %v is not after NotBefore %v", notAfter, notBefore)
	}

	isCA := !leaf
	if c.isCASet {
		isCA = c.isCA
	}
	var usage x509.KeyUsage
	if leaf || !isCA {
		usage = x509.KeyUsageDigitalSignature
		if _, ok := key.(*rsa.PrivateKey); ok {
			usage |= x509.KeyUsageKeyEncipherment
		}
	}
	if isCA {
		usage |= x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	}

	tmpl := &x509.Certificate{
		SerialNumber:                serial,
		Subject:                     pkix.Name{CommonName: c.commonName, Organization: c.organization},
		NotBefore:                   notBefore,
		NotAfter:                    notAfter,
		KeyUsage:                    usage,
		ExtKeyUsage:                 c.extKeyUsages,
		BasicConstraintsValid:       true,
		IsCA:                        isCA,
		SubjectKeyId:                ski,
		AuthorityKeyId:              ski,
		DNSNames:                    c.dnsNames,
		IPAddresses:                 c.ipAddresses,
		URIs:                        c.uris,
		PermittedDNSDomains:         c.permittedDNS,
		PermittedDNSDomainsCritical: len(c.permittedDNS) > 0,
	}
	if !c.commonNameSet {
		if leaf {
			tmpl.Subject.CommonName = "localhost"
		} else {
			tmpl.Subject.CommonName = cnPrefix + randomHex(4)
		}
	}
	if leaf && !c.dnsNamesSet {
		tmpl.DNSNames = []string{"localhost"}
	}
	if leaf && !c.ipAddressesSet {
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	}
	if leaf && !c.extKeyUsagesSet {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}

	issuerCert, issuerKey := tmpl, key
	if parent != nil {
		issuerCert, issuerKey = parent.Cert, parent.Key
		tmpl.AuthorityKeyId = parent.Cert.SubjectKeyId
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuerCert, key.Public(), issuerKey)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

// subjectKeyID follows RFC 7093 section 2 method 1: the leftmost 160 bits of
// the SHA-256 hash of the subjectPublicKey BIT STRING.
func subjectKeyID(pub crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	var spki struct {
		Algorithm pkix.AlgorithmIdentifier
		PublicKey asn1.BitString
	}
	if _, err := asn1.Unmarshal(der, &spki); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(spki.PublicKey.Bytes)
	return sum[:20], nil
}

func certPEM(cert *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never returns an error
	return hex.EncodeToString(b)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
