package hotcert

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
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
	afterFunc    func(time.Duration, func()) func() bool // the timer of now's clock
	chainTo      *x509.CertPool
	chainToOwn   bool
	ekus         []x509.ExtKeyUsage
	minRSABits   int
	minECDSABits int
	maxSize      int
	requireID    bool
	requireTrust bool
}

// WithClock sets the clock validity windows are checked against (default
// time.Now; a nil clock is time.Now too). A [Reloader] that refused a renewal not
// valid yet looks at now again until it has passed the renewal's NotBefore; as
// nothing can wake it when now is moved, it looks once a second, so a test that
// moves now past NotBefore sees the renewal adopted within a second. Give a
// [Clock] with [WithTimerClock] to have it woken by your clock instead.
func WithClock(now func() time.Time) ValidateOption {
	return validateOptionFunc(func(c *validateConfig) {
		if now == nil {
			c.now, c.afterFunc = time.Now, wallAfterFunc
			return
		}
		c.now, c.afterFunc = now, readClockAfterFunc(now)
	})
}

// WithTimerClock is [WithClock] with a [Clock]: validity windows are checked
// against c.Now, and a [Reloader] that refused a certificate not valid yet looks
// at it again when c reaches its NotBefore (c.AfterFunc), so advancing a fake
// clock past NotBefore adopts the renewal at once. A nil c is the wall clock.
func WithTimerClock(c Clock) ValidateOption {
	return validateOptionFunc(func(cfg *validateConfig) {
		cfg.now, cfg.afterFunc = time.Now, wallAfterFunc
		if c != nil {
			cfg.now, cfg.afterFunc = c.Now, c.AfterFunc
		}
	})
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
//   - the chain and the bundle follow hotcert's PEM grammar ([DecodePEM]): text
//     outside blocks is ignored, but every BEGIN line must start a well-formed
//     block, and every block (parameter blocks aside) must be a certificate that
//     parses, so a bundle whose second CA is truncated is rejected, not silently
//     shortened (x509.CertPool.AppendCertsFromPEM would keep the first);
//   - the key file holds exactly one private key ([ParsePrivateKey]; an `EC
//     PARAMETERS` block before it is skipped), and it matches the leaf;
//   - every certificate of the chain is inside its validity window, judged
//     against the clock of [WithClock] with no tolerance: valid from NotBefore to
//     NotAfter inclusive;
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
		return nil, newError(sourceName(c), ReasonIncomplete, nil, "holds neither a certificate nor a CA bundle")
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

// chainPosition names certificate i of a chain for an error message.
func chainPosition(i int) string {
	if i == 0 {
		return "leaf certificate"
	}
	return fmt.Sprintf("chain certificate %d", i+1)
}

// earliestNotBefore returns the earliest NotBefore of chain after now: the first
// moment a not-yet-valid refusal of it may change.
func earliestNotBefore(chain []*x509.Certificate, now time.Time) time.Time {
	var at time.Time
	for _, crt := range chain {
		if now.Before(crt.NotBefore) && (at.IsZero() || crt.NotBefore.Before(at)) {
			at = crt.NotBefore
		}
	}
	return at
}

// validationClock returns the clock opts validate against, with its timer.
func validationClock(opts []ValidateOption) Clock {
	cfg := validateConfig{now: time.Now, afterFunc: wallAfterFunc}
	for _, o := range opts {
		o.applyValidate(&cfg)
	}
	return funcClock{cfg.now, cfg.afterFunc}
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
	key, err := ParsePrivateKey(c.Key)
	if err != nil {
		return err
	}
	if pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(chain[0].PublicKey) {
		if c.Key.Name == c.Cert.Name {
			// One input holds both (a credential bundle): name the certificate, not
			// the input again.
			return newError(c.Key.Name, ReasonKeyMismatch, nil, "private key does not match the leaf certificate (%s)", describe(chain[0]))
		}
		return newError(c.Key.Name, ReasonKeyMismatch, nil, "private key does not match the certificate in %s", c.Cert.Name)
	}
	cert := tls.Certificate{PrivateKey: key, Leaf: chain[0]}
	for _, crt := range chain {
		cert.Certificate = append(cert.Certificate, crt.Raw)
	}
	// An expired certificate is a final refusal; one not valid yet may be accepted
	// later, so expiry is checked first.
	for i, crt := range chain {
		if now.After(crt.NotAfter) {
			return newError(c.Cert.Name, ReasonExpired, nil, "%s (%s) expired at %s", chainPosition(i), describe(crt), crt.NotAfter.UTC().Format(time.RFC3339))
		}
	}
	for i, crt := range chain {
		if now.Before(crt.NotBefore) {
			e := newError(c.Cert.Name, ReasonNotYetValid, nil, "%s (%s) is not valid before %s", chainPosition(i), describe(crt), crt.NotBefore.UTC().Format(time.RFC3339))
			e.validFrom = earliestNotBefore(chain, now)
			return e
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
		_, err := VerifyChain(chain, x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
		if err != nil {
			return newError(c.Cert.Name, ReasonChain, err, "leaf certificate (%s) does not chain to %s", describe(leaf), rootsName)
		}
	}
	m.cert = &cert
	m.chain = chain
	m.leafFP = FingerprintOf(leaf)
	return nil
}

// VerifyChain verifies chain[0] the way crypto/tls verifies a peer: the rest of the
// chain serves as intermediates (added to a copy of opts.Intermediates, if any), and
// every other setting (roots, time, name, key usages) comes from opts. It returns
// the verified chains, as x509.Certificate.Verify does.
func VerifyChain(chain []*x509.Certificate, opts x509.VerifyOptions) ([][]*x509.Certificate, error) {
	if len(chain) == 0 {
		return nil, errors.New("hotcert: no certificate to verify")
	}
	if opts.Intermediates == nil {
		opts.Intermediates = x509.NewCertPool()
	} else {
		opts.Intermediates = opts.Intermediates.Clone()
	}
	for _, c := range chain[1:] {
		opts.Intermediates.AddCert(c)
	}
	return chain[0].Verify(opts)
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

// describe names a certificate for an error message: subject CN (or, without one,
// the whole subject, which names its own attributes) and serial. It never includes
// key material.
func describe(c *x509.Certificate) string {
	name := "CN=" + c.Subject.CommonName
	if c.Subject.CommonName == "" {
		name = c.Subject.String() // e.g. "O=Acme", or "" for a SAN-only certificate
	}
	if name == "" {
		name = "empty subject"
	}
	return fmt.Sprintf("%s serial=%s", name, FormatSerial(c.SerialNumber))
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
