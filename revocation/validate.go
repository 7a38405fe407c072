package revocation

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/hotcert/hotcert"
)

// Reasons a deny list is refused, besides hotcert's (ReasonEmpty, ReasonPEM,
// ReasonParse, ReasonIncomplete, ReasonTooLarge, ...). Stable, safe as a label.
const (
	// ReasonSignature: a CRL's issuer is not a CA of the trust bundle, or its
	// signature does not verify against it (a forged CRL).
	ReasonSignature hotcert.Reason = "crl_signature"
	// ReasonStale: a CRL's NextUpdate has passed (an old CRL replayed, or a
	// publisher that stopped); the list in use stays.
	ReasonStale hotcert.Reason = "crl_stale"
)

// Validate turns content into a List: every line of the deny list parses, every
// CRL parses, verifies against the CA of trust's bundle that issued it and is not
// stale at now. trust may be nil when the content holds no CRL.
func Validate(c Content, trust *hotcert.Material, now time.Time) (*List, error) {
	if !c.DenyList.Present() && !c.CRLs.Present() {
		return nil, &hotcert.Error{Input: c.Source, Reason: hotcert.ReasonIncomplete, Detail: "neither a deny list nor a CRL"}
	}
	l := &List{serials: map[hotcert.Fingerprint]map[string]string{}, spki: map[[32]byte]struct{}{},
		version: c.Hash(), source: c.Source, loadedAt: now}
	if c.DenyList.Present() {
		if err := l.parseDenyList(c.DenyList); err != nil {
			return nil, err
		}
	}
	if c.CRLs.Present() {
		if err := l.addCRLs(c.CRLs, trust, now); err != nil {
			return nil, err
		}
	}
	return l, nil
}

func (l *List) parseDenyList(in hotcert.Input) error {
	if len(bytes.TrimSpace(in.Data)) == 0 {
		// A zero-length file is what a truncating writer leaves mid-write: never
		// read it as "nothing is revoked". An empty list says so with a comment.
		return &hotcert.Error{Input: in.Name, Reason: hotcert.ReasonEmpty, Detail: "deny list is empty (write a comment line for a list with no entry)"}
	}
	sc := bufio.NewScanner(bytes.NewReader(in.Data))
	sc.Buffer(nil, len(in.Data)+1)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := l.parseEntry(strings.Fields(line)); err != nil {
			return &hotcert.Error{Input: in.Name, Reason: hotcert.ReasonParse, Detail: fmt.Sprintf("line %d", n), Err: err}
		}
	}
	if err := sc.Err(); err != nil {
		return &hotcert.Error{Input: in.Name, Reason: hotcert.ReasonParse, Detail: "reading the deny list", Err: err}
	}
	return nil
}

func (l *List) parseEntry(f []string) error {
	switch {
	case len(f) == 4 && f[0] == "serial" && f[2] == "issuer":
		serial, err := parseSerial(f[1])
		if err != nil {
			return err
		}
		fp, err := parseSHA256(f[3])
		if err != nil {
			return fmt.Errorf("issuer: %w", err)
		}
		l.addSerial(hotcert.Fingerprint(fp), serial, "deny list")
		return nil
	case len(f) == 2 && f[0] == "spki":
		h, err := parseSHA256(f[1])
		if err != nil {
			return fmt.Errorf("spki: %w", err)
		}
		l.spki[h] = struct{}{}
		return nil
	default:
		return errors.New(`want "serial <hex> issuer <sha256 of the CA certificate>" or "spki <sha256>"`)
	}
}

func (l *List) addSerial(issuer hotcert.Fingerprint, serial *big.Int, where string) {
	m := l.serials[issuer]
	if m == nil {
		m = map[string]string{}
		l.serials[issuer] = m
	}
	m[hotcert.FormatSerial(serial)] = where
}

func parseSerial(s string) (*big.Int, error) {
	s = strings.TrimPrefix(strings.ReplaceAll(s, ":", ""), "serial=")
	n, ok := new(big.Int).SetString(s, 16)
	if !ok || s == "" || strings.HasPrefix(s, "-") || strings.HasPrefix(s, "+") {
		return nil, fmt.Errorf("serial %q is not a hex number", s)
	}
	return n, nil
}

func parseSHA256(s string) ([32]byte, error) {
	var h [32]byte
	b, err := hex.DecodeString(strings.ReplaceAll(s, ":", ""))
	if err != nil || len(b) != len(h) {
		return h, fmt.Errorf("%q is not a SHA-256 (64 hex digits)", s)
	}
	copy(h[:], b)
	return h, nil
}

// addCRLs parses every CRL of in and adds its entries under the trust-bundle CA
// whose signature verifies it.
func (l *List) addCRLs(in hotcert.Input, trust *hotcert.Material, now time.Time) error {
	ders, err := crlDERs(in)
	if err != nil {
		return err
	}
	for i, der := range ders {
		what := fmt.Sprintf("CRL %d", i+1)
		crl, err := x509.ParseRevocationList(der)
		if err != nil {
			return &hotcert.Error{Input: in.Name, Reason: hotcert.ReasonParse, Detail: what + " does not parse", Err: err}
		}
		ca, err := crlIssuer(crl, trust)
		if err != nil {
			return &hotcert.Error{Input: in.Name, Reason: ReasonSignature, Detail: fmt.Sprintf("%s (issuer %s)", what, crl.Issuer), Err: err}
		}
		info := CRLInfo{Issuer: crl.Issuer.String(), IssuerSHA256: hotcert.FingerprintOf(ca).String(),
			ThisUpdate: crl.ThisUpdate.UTC(), NextUpdate: crl.NextUpdate.UTC(), Entries: len(crl.RevokedCertificateEntries)}
		if crl.NextUpdate.IsZero() {
			info.NextUpdate = time.Time{}
		}
		if crl.Number != nil {
			info.Number = crl.Number.String()
		}
		if info.stale(now) {
			return &hotcert.Error{Input: in.Name, Reason: ReasonStale,
				Detail: fmt.Sprintf("%s (issuer %s) is stale: its NextUpdate %s has passed", what, crl.Issuer, info.NextUpdate.Format(time.RFC3339))}
		}
		for _, e := range crl.RevokedCertificateEntries {
			l.addSerial(hotcert.FingerprintOf(ca), e.SerialNumber, "CRL of "+info.Issuer)
		}
		l.crls = append(l.crls, info)
	}
	return nil
}

// crlDERs returns the DER of every CRL of in: its PEM "X509 CRL" blocks, or in
// itself when it holds no PEM block (one DER CRL).
func crlDERs(in hotcert.Input) ([][]byte, error) {
	blocks, err := hotcert.DecodePEM(in)
	if err != nil {
		return nil, err
	}
	if len(blocks) == 0 {
		if len(bytes.TrimSpace(in.Data)) == 0 {
			return nil, &hotcert.Error{Input: in.Name, Reason: hotcert.ReasonEmpty, Detail: "holds no CRL"}
		}
		return [][]byte{in.Data}, nil
	}
	var ders [][]byte
	for i, b := range blocks {
		if b.Type != "X509 CRL" {
			return nil, &hotcert.Error{Input: in.Name, Reason: hotcert.ReasonPEM, Detail: fmt.Sprintf("PEM block %d is a %s, not an X509 CRL", i+1, b.Type)}
		}
		ders = append(ders, b.Bytes)
	}
	return ders, nil
}

// crlIssuer returns the CA of trust's bundle that issued crl: its subject is the
// CRL's issuer and its signature verifies.
func crlIssuer(crl *x509.RevocationList, trust *hotcert.Material) (*x509.Certificate, error) {
	if !trust.HasTrust() {
		return nil, errors.New("no CA bundle to verify the CRL's signature against")
	}
	var last error
	for _, ca := range trust.TrustCertificates() {
		if !bytes.Equal(ca.RawSubject, crl.RawIssuer) {
			continue
		}
		if last = crl.CheckSignatureFrom(ca); last == nil {
			return ca, nil
		}
	}
	if last != nil {
		return nil, fmt.Errorf("its signature does not verify against the CA of that name in the bundle: %w", last)
	}
	return nil, errors.New("no CA of the trust bundle has its issuer's name")
}

// spkiHash is the SHA-256 of a certificate's SubjectPublicKeyInfo, as spki entries
// name it (openssl x509 -pubkey | openssl pkey -pubin -outform DER | sha256sum).
func spkiHash(c *x509.Certificate) [32]byte { return sha256.Sum256(c.RawSubjectPublicKeyInfo) }
