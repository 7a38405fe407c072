package hotcert

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
	"time"
)

// DefaultMaxInputSize caps each input (certificate chain, key, CA bundle) at 1 MiB:
// far above any real chain or bundle, far below what a symlink to /dev/zero would
// make a naive reader allocate.
const DefaultMaxInputSize = 1 << 20

// ValidateOption configures [Validate].
type ValidateOption interface{ applyValidate(*validateConfig) }

type validateOptionFunc func(*validateConfig)

func (f validateOptionFunc) applyValidate(c *validateConfig) { f(c) }

type validateConfig struct {
	now          func() time.Time
	chainTo      *x509.CertPool
	chainToOwn   bool
	ekus         []x509.ExtKeyUsage
	minRSABits   int
	minECDSABits int
	maxSize      int
	requireID    bool
	requireTrust bool
}

// WithClock sets the clock validity windows are checked against (default time.Now).
func WithClock(now func() time.Time) ValidateOption {
	return validateOptionFunc(func(c *validateConfig) { c.now = now })
}

// WithChainTo requires the leaf to chain, through the intermediates in its chain, to
// one of roots.
func WithChainTo(roots *x509.CertPool) ValidateOption {
	return validateOptionFunc(func(c *validateConfig) { c.chainTo = roots })
}

// WithChainToOwnTrust requires the leaf to chain to the trust bundle of the same
// content (for a server whose bundle holds its own issuer).
func WithChainToOwnTrust() ValidateOption {
	return validateOptionFunc(func(c *validateConfig) { c.chainToOwn = true })
}

// WithRequiredUsages requires the leaf to carry each of the given extended key
// usages explicitly (or x509.ExtKeyUsageAny). For a server certificate pass
// x509.ExtKeyUsageServerAuth, for a client certificate x509.ExtKeyUsageClientAuth.
func WithRequiredUsages(usages ...x509.ExtKeyUsage) ValidateOption {
	return validateOptionFunc(func(c *validateConfig) { c.ekus = append(c.ekus, usages...) })
}

// WithMinKeyStrength rejects a leaf key weaker than rsaBits (RSA) or ecdsaBits
// (ECDSA curve size). Ed25519 is always accepted. Zero disables a check.
func WithMinKeyStrength(rsaBits, ecdsaBits int) ValidateOption {
	return validateOptionFunc(func(c *validateConfig) { c.minRSABits, c.minECDSABits = rsaBits, ecdsaBits })
}

// WithMaxInputSize caps each input at n bytes (default [DefaultMaxInputSize]).
func WithMaxInputSize(n int) ValidateOption {
	return validateOptionFunc(func(c *validateConfig) { c.maxSize = n })
}

// WithRequireIdentity makes content without a certificate and key an error.
func WithRequireIdentity() ValidateOption {
	return validateOptionFunc(func(c *validateConfig) { c.requireID = true })
}

// WithRequireTrust makes content without a CA bundle an error.
func WithRequireTrust() ValidateOption {
	return validateOptionFunc(func(c *validateConfig) { c.requireTrust = true })
}

// Validate turns raw content into Material, or explains why it cannot. It checks:
//
//   - every PEM block of the chain and of the bundle parses, and nothing but
//     whitespace surrounds them: a bundle whose second CA is truncated is rejected,
//     not silently shortened (x509.CertPool.AppendCertsFromPEM would keep the first);
//   - the private key parses and matches the leaf;
//   - every certificate of the chain is inside its validity window;
//   - the bundle holds at least one certificate, and each is a CA;
//   - the optional policies: chain to given roots or to the own bundle, required
//     extended key usages, minimum key strength;
//   - each input is at most the size cap.
//
// Every error is an [*Error] naming the input and the problem; none contains key
// material. Content must hold an identity, a trust bundle, or both.
func Validate(c Content, opts ...ValidateOption) (*Material, error) {
	cfg := validateConfig{now: time.Now, maxSize: DefaultMaxInputSize}
	for _, o := range opts {
		o.applyValidate(&cfg)
	}
	now := cfg.now()
	m := &Material{contentHash: c.Hash(), source: c.Source, loadedAt: now}

	for _, in := range [...]Input{c.Cert, c.Key, c.CA} {
		if in.Present() && cfg.maxSize > 0 && len(in.Data) > cfg.maxSize {
			return nil, newError(in.Name, ReasonTooLarge, nil, "is %d bytes, more than the %d byte cap", len(in.Data), cfg.maxSize)
		}
	}

	switch {
	case c.Cert.Present() != c.Key.Present():
		missing := "private key"
		have := c.Cert
		if !c.Cert.Present() {
			missing, have = "certificate", c.Key
		}
		return nil, newError(have.Name, ReasonIncomplete, nil, "has no matching %s", missing)
	case !c.Cert.Present() && !c.CA.Present():
		name := c.Source
		if name == "" {
			name = "content"
		}
		return nil, newError(name, ReasonIncomplete, nil, "holds neither a certificate nor a CA bundle")
	case cfg.requireID && !c.Cert.Present():
		return nil, newError(sourceName(c), ReasonIncomplete, nil, "holds no certificate and key, but an identity is required")
	case cfg.requireTrust && !c.CA.Present():
		return nil, newError(sourceName(c), ReasonIncomplete, nil, "holds no CA bundle, but one is required")
	}

	if c.CA.Present() {
		certs, err := parseCertificates(c.CA, "CA bundle")
		if err != nil {
			return nil, err
		}
		for i, ca := range certs {
			if !ca.BasicConstraintsValid || !ca.IsCA {
				return nil, newError(c.CA.Name, ReasonNotCA, nil, "certificate %d of the CA bundle (%s) is not a CA", i+1, describe(ca))
			}
		}
		m.trustCerts = certs
		m.trustPool = x509.NewCertPool()
		for _, ca := range certs {
			m.trustPool.AddCert(ca)
			m.trustFPs = append(m.trustFPs, FingerprintOf(ca))
		}
	}

	if c.Cert.Present() {
		if err := m.loadIdentity(c, &cfg, now); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func sourceName(c Content) string {
	if c.Source != "" {
		return c.Source
	}
	return "content"
}

func (m *Material) loadIdentity(c Content, cfg *validateConfig, now time.Time) error {
	chain, err := parseCertificates(c.Cert, "certificate chain")
	if err != nil {
		return err
	}
	if err := checkKeyPEM(c.Key); err != nil {
		return err
	}
	cert, err := tls.X509KeyPair(c.Cert.Data, c.Key.Data)
	if err != nil {
		// tls.X509KeyPair errors describe the mismatch or parse failure, never the key.
		if isMismatch(err) {
			return newError(c.Key.Name, ReasonKeyMismatch, nil, "private key does not match the certificate in %s", c.Cert.Name)
		}
		return newError(c.Key.Name, ReasonParse, err, "private key does not load")
	}
	cert.Leaf = chain[0]
	for i, crt := range chain {
		what := "leaf certificate"
		if i > 0 {
			what = fmt.Sprintf("chain certificate %d", i+1)
		}
		if now.After(crt.NotAfter) {
			return newError(c.Cert.Name, ReasonExpired, nil, "%s (%s) expired at %s", what, describe(crt), crt.NotAfter.UTC().Format(time.RFC3339))
		}
		if now.Before(crt.NotBefore) {
			return newError(c.Cert.Name, ReasonNotYetValid, nil, "%s (%s) is not valid before %s", what, describe(crt), crt.NotBefore.UTC().Format(time.RFC3339))
		}
	}
	leaf := chain[0]
	for _, u := range cfg.ekus {
		if !slices.Contains(leaf.ExtKeyUsage, u) && !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageAny) {
			return newError(c.Cert.Name, ReasonUsage, nil, "leaf certificate (%s) lacks extended key usage %s", describe(leaf), ekuName(u))
		}
	}
	if err := checkKeyStrength(leaf, cfg); err != nil {
		return newError(c.Cert.Name, ReasonWeakKey, nil, "leaf certificate (%s) %s", describe(leaf), err)
	}
	roots := cfg.chainTo
	rootsName := "the required roots"
	if cfg.chainToOwn {
		roots, rootsName = m.trustPool, c.CA.Name
		if roots == nil {
			return newError(c.Cert.Name, ReasonChain, nil, "leaf must chain to its own CA bundle, but there is none")
		}
	}
	if roots != nil {
		inter := x509.NewCertPool()
		for _, crt := range chain[1:] {
			inter.AddCert(crt)
		}
		_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
		if err != nil {
			return newError(c.Cert.Name, ReasonChain, err, "leaf certificate (%s) does not chain to %s", describe(leaf), rootsName)
		}
	}
	m.cert = &cert
	m.chain = chain
	m.leafFP = FingerprintOf(leaf)
	return nil
}

// parseCertificates decodes every PEM block of in and parses each as a certificate.
// Unlike x509.CertPool.AppendCertsFromPEM it rejects the whole input when any block is
// broken, of another type, or followed by bytes that are not a PEM block (the usual
// shape of a truncated write).
func parseCertificates(in Input, what string) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	rest := in.Data
	for i := 1; ; i++ {
		rest = bytes.TrimSpace(rest)
		if len(rest) == 0 {
			break
		}
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			if len(certs) == 0 && !bytes.Contains(in.Data, []byte("-----BEGIN")) {
				return nil, newError(in.Name, ReasonEmpty, nil, "%s holds no PEM block", what)
			}
			return nil, newError(in.Name, ReasonPEM, nil, "PEM block %d of the %s is malformed or truncated", i, what)
		}
		if block.Type != "CERTIFICATE" {
			return nil, newError(in.Name, ReasonPEM, nil, "PEM block %d of the %s is %s, not a CERTIFICATE", i, what, blockKind(block.Type))
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, newError(in.Name, ReasonParse, err, "certificate %d of the %s does not parse", i, what)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, newError(in.Name, ReasonEmpty, nil, "%s holds no certificate", what)
	}
	return certs, nil
}

// checkKeyPEM makes sure the key input is exactly one well-formed private key block,
// so a truncated key is reported as such rather than as a parse error.
func checkKeyPEM(in Input) error {
	rest := bytes.TrimSpace(in.Data)
	if len(rest) == 0 {
		return newError(in.Name, ReasonEmpty, nil, "private key file is empty")
	}
	block, rest := pem.Decode(rest)
	if block == nil {
		return newError(in.Name, ReasonPEM, nil, "private key PEM block is malformed or truncated")
	}
	switch block.Type {
	case "PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY":
	case "ENCRYPTED PRIVATE KEY":
		return newError(in.Name, ReasonParse, nil, "private key is encrypted; hotcert needs an unencrypted key")
	default:
		return newError(in.Name, ReasonPEM, nil, "PEM block is %s, not a private key", blockKind(block.Type))
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return newError(in.Name, ReasonPEM, nil, "private key file has data after the key block")
	}
	return nil
}

// isMismatch recognises tls.X509KeyPair's "private key does not match public key" and
// "private key type does not match public key type": crypto/tls exports no sentinel.
func isMismatch(err error) bool {
	return err != nil && strings.Contains(err.Error(), "does not match public key")
}

// blockKind names a PEM block type for an error message. Key types are named
// generically so that error output never even looks like key material.
func blockKind(typ string) string {
	if strings.Contains(typ, "PRIVATE KEY") {
		return "a private key"
	}
	return fmt.Sprintf("a %q", typ)
}

func checkKeyStrength(leaf *x509.Certificate, cfg *validateConfig) error {
	switch k := leaf.PublicKey.(type) {
	case *rsa.PublicKey:
		if cfg.minRSABits > 0 && k.N.BitLen() < cfg.minRSABits {
			return fmt.Errorf("has a %d-bit RSA key, less than the required %d bits", k.N.BitLen(), cfg.minRSABits)
		}
	case *ecdsa.PublicKey:
		if bits := k.Curve.Params().BitSize; cfg.minECDSABits > 0 && bits < cfg.minECDSABits {
			return fmt.Errorf("has a %d-bit ECDSA key, less than the required %d bits", bits, cfg.minECDSABits)
		}
	case ed25519.PublicKey:
	default:
		return fmt.Errorf("has an unsupported key type %T", k)
	}
	return nil
}

// describe names a certificate for an error message: subject CN (or full subject) and
// serial. It never includes key material.
func describe(c *x509.Certificate) string {
	name := c.Subject.CommonName
	if name == "" {
		name = c.Subject.String()
	}
	return fmt.Sprintf("CN=%s serial=%s", name, c.SerialNumber.Text(16))
}

func ekuName(u x509.ExtKeyUsage) string {
	switch u {
	case x509.ExtKeyUsageServerAuth:
		return "serverAuth"
	case x509.ExtKeyUsageClientAuth:
		return "clientAuth"
	case x509.ExtKeyUsageAny:
		return "any"
	default:
		return fmt.Sprintf("%d", int(u))
	}
}
