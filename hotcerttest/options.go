package hotcerttest

import (
	"crypto/x509"
	"math/big"
	"net"
	"net/url"
	"time"
)

// An Option changes how [NewCA], [CA.NewIntermediate] or [CA.Issue] build a
// certificate. Options are applied in order; when two options set the same
// field, the last one wins.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// config collects the effect of the options. The *Set flags distinguish
// "not given" (use the default for the kind of certificate) from "given empty".
type config struct {
	commonName   string
	dnsNames     []string
	ipAddresses  []net.IP
	uris         []*url.URL
	extKeyUsages []x509.ExtKeyUsage
	organization []string
	permittedDNS []string
	notBefore    time.Time
	notAfter     time.Time
	lifetime     time.Duration
	keyType      KeyType
	now          func() time.Time
	serial       *big.Int
	isCA         bool

	commonNameSet, dnsNamesSet, ipAddressesSet, extKeyUsagesSet bool
	validitySet, isCASet                                        bool
}

func newConfig(opts []Option) *config {
	c := &config{now: time.Now}
	for _, o := range opts {
		if o != nil {
			o.apply(c)
		}
	}
	return c
}

// WithCommonName sets the subject common name. The default is "localhost" for
// a leaf and "hotcert test CA <random>" for a CA.
func WithCommonName(cn string) Option {
	return optionFunc(func(c *config) { c.commonName, c.commonNameSet = cn, true })
}

// WithDNSNames replaces the DNS subject alternative names. The default is
// "localhost" for a leaf and none for a CA; WithDNSNames() with no argument
// removes them.
func WithDNSNames(names ...string) Option {
	return optionFunc(func(c *config) { c.dnsNames, c.dnsNamesSet = append([]string(nil), names...), true })
}

// WithIPAddresses replaces the IP subject alternative names. The default is
// 127.0.0.1 and ::1 for a leaf and none for a CA; WithIPAddresses() with no
// argument removes them.
func WithIPAddresses(ips ...net.IP) Option {
	return optionFunc(func(c *config) { c.ipAddresses, c.ipAddressesSet = append([]net.IP(nil), ips...), true })
}

// WithURIs adds URI subject alternative names, e.g. a SPIFFE ID
// ("spiffe://example.org/ns/default/sa/web"). It panics on a name that does not
// parse as a URL.
func WithURIs(uris ...string) Option {
	return optionFunc(func(c *config) {
		for _, s := range uris {
			u, err := url.Parse(s)
			if err != nil {
				panic("hotcerttest: WithURIs: " + err.Error())
			}
			c.uris = append(c.uris, u)
		}
	})
}

// WithExtKeyUsages replaces the extended key usages. The default is serverAuth
// and clientAuth for a leaf and none (any usage) for a CA.
func WithExtKeyUsages(usages ...x509.ExtKeyUsage) Option {
	return optionFunc(func(c *config) {
		c.extKeyUsages, c.extKeyUsagesSet = append([]x509.ExtKeyUsage(nil), usages...), true
	})
}

// WithValidity sets NotBefore and NotAfter exactly. It overrides [WithLifetime].
func WithValidity(notBefore, notAfter time.Time) Option {
	return optionFunc(func(c *config) {
		c.notBefore, c.notAfter, c.validitySet, c.lifetime = notBefore, notAfter, true, 0
	})
}

// WithLifetime makes the certificate valid from one minute before now (see
// [WithNow]) until now+d. It overrides [WithValidity]. The default lifetime is
// 24 hours for a leaf and 10 years for a CA.
func WithLifetime(d time.Duration) Option {
	return optionFunc(func(c *config) { c.lifetime, c.validitySet = d, false })
}

// WithKeyType selects the key algorithm of the new certificate. The default,
// and the fastest to generate, is [ECDSAP256].
func WithKeyType(kt KeyType) Option {
	return optionFunc(func(c *config) { c.keyType = kt })
}

// WithPermittedDNSDomains adds a critical name constraints extension that
// permits only the given DNS domains (and their subdomains). It is meant for
// CAs; x509.Verify enforces it on every certificate below that CA.
func WithPermittedDNSDomains(domains ...string) Option {
	return optionFunc(func(c *config) { c.permittedDNS = append([]string(nil), domains...) })
}

// WithIsCA overrides whether the certificate is a CA. WithIsCA(false) on
// [NewCA] builds a self-signed non-CA certificate (for example to put into a
// CA bundle where it does not belong); WithIsCA(true) on [CA.Issue] builds a
// leaf that is also a CA.
func WithIsCA(isCA bool) Option {
	return optionFunc(func(c *config) { c.isCA, c.isCASet = isCA, true })
}

// WithNow sets the clock used to compute default validity periods and
// [WithLifetime]. A nil function means time.Now.
func WithNow(now func() time.Time) Option {
	return optionFunc(func(c *config) {
		if now == nil {
			now = time.Now
		}
		c.now = now
	})
}

// WithSerial sets the serial number. The default is a random 128-bit number.
func WithSerial(serial *big.Int) Option {
	return optionFunc(func(c *config) { c.serial = serial })
}

// WithSubjectOrganization sets the subject organization (O) attribute.
func WithSubjectOrganization(org ...string) Option {
	return optionFunc(func(c *config) { c.organization = append([]string(nil), org...) })
}
