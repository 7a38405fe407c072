package revocation

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"math/big"
	"time"

	"github.com/hotcert/hotcert"
)

// List is one validated deny list: immutable, shared by every handshake that
// checks against it. A nil *List denies nothing.
type List struct {
	// serials maps an issuing CA (SHA-256 of its certificate) to the serials it
	// revoked (hotcert.FormatSerial), each with where it is listed.
	serials map[hotcert.Fingerprint]map[string]string
	spki    map[[32]byte]struct{}
	crls    []CRLInfo
	policy  StalePolicy
	now     func() time.Time

	version    [32]byte // SHA-256 of the list's content alone
	hash       [32]byte // the engine's key: the content and the trust it was checked against
	source     string
	generation uint64
	loadedAt   time.Time
}

// CRLInfo describes one CRL of a List.
type CRLInfo struct {
	// Issuer is the CRL issuer's distinguished name.
	Issuer string `json:"issuer"`
	// IssuerSHA256 is the fingerprint of the trust-bundle CA whose signature verified.
	IssuerSHA256 string `json:"issuer_sha256"`
	// Number is the CRL number (empty when the CRL has none).
	Number string `json:"number,omitempty"`
	// ThisUpdate and NextUpdate are the CRL's; NextUpdate is zero when absent.
	ThisUpdate time.Time `json:"this_update"`
	NextUpdate time.Time `json:"next_update,omitzero"`
	// Entries is how many serials it revokes.
	Entries int `json:"entries"`
}

// Info describes a List for status pages, agents' reports and `*_info` series. It
// holds no certificate, only counts, dates and the version.
type Info struct {
	// Version is the first 16 hex digits of the SHA-256 of the list's content: the
	// same bytes are the same version on every replica and agent.
	Version    string    `json:"version"`
	Generation uint64    `json:"generation"`
	Source     string    `json:"source"`
	LoadedAt   time.Time `json:"loaded_at"`
	// Serials counts revoked serials (deny list and CRLs), SPKIs listed keys.
	Serials int       `json:"serials"`
	SPKIs   int       `json:"spkis"`
	CRLs    []CRLInfo `json:"crls,omitempty"`
	// Stale names the CRLs whose NextUpdate has passed (by issuer).
	Stale []string `json:"stale,omitempty"`
}

// Info describes l (the zero Info for nil).
func (l *List) Info() Info {
	if l == nil {
		return Info{}
	}
	in := Info{Version: l.Version(), Generation: l.generation, Source: l.source, LoadedAt: l.loadedAt,
		SPKIs: len(l.spki), CRLs: l.crls}
	for _, s := range l.serials {
		in.Serials += len(s)
	}
	now := l.clock()
	for _, c := range l.crls {
		if c.stale(now) {
			in.Stale = append(in.Stale, c.Issuer)
		}
	}
	return in
}

// Version is the first 16 hex digits of the SHA-256 of the list's content ("" for nil).
func (l *List) Version() string {
	if l == nil {
		return ""
	}
	return hex.EncodeToString(l.version[:8])
}

// Generation counts published lists: 1 for the first load (0 for nil).
func (l *List) Generation() uint64 {
	if l == nil {
		return 0
	}
	return l.generation
}

// Source says where the list was read from.
func (l *List) Source() string {
	if l == nil {
		return ""
	}
	return l.source
}

// Revokes reports whether the list names serial as revoked by some issuer (a
// question for status pages; handshakes use [List.Check], which also checks the
// issuer).
func (l *List) Revokes(serial *big.Int) bool {
	if l == nil {
		return false
	}
	s := hotcert.FormatSerial(serial)
	for _, m := range l.serials {
		if _, ok := m[s]; ok {
			return true
		}
	}
	return false
}

func (l *List) clock() time.Time {
	if l.now == nil {
		return time.Now()
	}
	return l.now()
}

// DeniedError says why a certificate chain was refused.
type DeniedError struct {
	// Subject and Serial name the refused certificate (the leaf, or the
	// intermediate the chain goes through).
	Subject string
	Serial  string
	// Why is "serial", "spki" or "stale_crl".
	Why string
	// Where is the entry's origin: "deny list", or "CRL of <issuer>".
	Where string
}

func (e *DeniedError) Error() string {
	switch e.Why {
	case "spki":
		return fmt.Sprintf("revocation: certificate %s (serial %s): its public key is on the deny list", e.Subject, e.Serial)
	case "stale_crl":
		return fmt.Sprintf("revocation: certificate %s (serial %s): the %s is stale and the policy refuses every peer of its issuer", e.Subject, e.Serial, e.Where)
	default:
		return fmt.Sprintf("revocation: certificate %s (serial %s) is revoked (%s)", e.Subject, e.Serial, e.Where)
	}
}

// Check returns a [*DeniedError] when a certificate of chain (leaf first, as
// verified: each certificate followed by its issuer) is denied: its SPKI is
// listed, its serial is revoked by the issuer that follows it in the chain, or,
// with [RefuseAll], a CRL of that issuer is stale. A nil List, or an empty chain,
// denies nothing. Its cost is a few hashes and map lookups per certificate of the
// chain, whatever the size of the list (BenchmarkDenyListHandshake).
func (l *List) Check(chain []*x509.Certificate) error {
	if l == nil || len(chain) == 0 {
		return nil
	}
	for i, c := range chain {
		if len(l.spki) > 0 {
			if _, ok := l.spki[sha256.Sum256(c.RawSubjectPublicKeyInfo)]; ok {
				return denied(c, "spki", "deny list")
			}
		}
		if i+1 >= len(chain) || len(l.serials) == 0 && len(l.crls) == 0 {
			continue
		}
		issuer := hotcert.FingerprintOf(chain[i+1])
		if m, ok := l.serials[issuer]; ok {
			if where, ok := m[hotcert.FormatSerial(c.SerialNumber)]; ok {
				return denied(c, "serial", where)
			}
		}
		if l.policy == RefuseAll {
			now := l.clock()
			for _, crl := range l.crls {
				if crl.stale(now) && crl.IssuerSHA256 == issuer.String() {
					return denied(c, "stale_crl", "CRL of "+crl.Issuer)
				}
			}
		}
	}
	return nil
}

func denied(c *x509.Certificate, why, where string) error {
	return &DeniedError{Subject: c.Subject.String(), Serial: hotcert.FormatSerial(c.SerialNumber), Why: why, Where: where}
}

func (c CRLInfo) stale(now time.Time) bool { return !c.NextUpdate.IsZero() && now.After(c.NextUpdate) }

// nextStale returns the earliest NextUpdate still ahead of now (zero if none).
func (l *List) nextStale(now time.Time) time.Time {
	var t time.Time
	if l == nil {
		return t
	}
	for _, c := range l.crls {
		if !c.NextUpdate.IsZero() && c.NextUpdate.After(now) && (t.IsZero() || c.NextUpdate.Before(t)) {
			t = c.NextUpdate
		}
	}
	return t
}

// withGeneration returns a copy of l numbered g.
func (l *List) withGeneration(g uint64) *List {
	c := *l
	c.generation = g
	return &c
}
