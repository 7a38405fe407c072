// Package inspect tells an operator what TLS material is in play during a
// rotation: Remote dials a server and reports the certificate it serves (and, for
// each CA of a bundle, whether the served chain verifies), Check validates
// certificate, key and bundle files exactly as hotcert's reloader does. They back
// the `hotcert inspect` and `hotcert check` commands and the control plane's
// /healthz.
package inspect

import (
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/hotcert/hotcert"
)

// Certificate describes one certificate with public data only.
type Certificate struct {
	Subject string `json:"subject"`
	Issuer  string `json:"issuer"`
	// Serial is the serial number in openssl's format (upper-case hex, even
	// length), as `openssl x509 -noout -serial` prints it.
	Serial      string    `json:"serial"`
	DNSNames    []string  `json:"dns_names,omitempty"`
	IPAddresses []string  `json:"ip_addresses,omitempty"`
	URIs        []string  `json:"uris,omitempty"`
	Emails      []string  `json:"emails,omitempty"`
	NotBefore   time.Time `json:"not_before"`
	NotAfter    time.Time `json:"not_after"`
	// SHA256 is the fingerprint of the DER encoding in lower-case hex, the one
	// format of every fingerprint in hotcert's machine output (JSON, logs,
	// metric labels, /healthz). The text output prints it in openssl's colon
	// format (`openssl x509 -noout -fingerprint -sha256`).
	SHA256 string `json:"sha256"`
	IsCA   bool   `json:"is_ca"`
}

// Describe returns the public description of c.
func Describe(c *x509.Certificate) Certificate {
	d := Certificate{
		Subject:   c.Subject.String(),
		Issuer:    c.Issuer.String(),
		Serial:    hotcert.FormatSerial(c.SerialNumber),
		DNSNames:  c.DNSNames,
		Emails:    c.EmailAddresses,
		NotBefore: c.NotBefore.UTC(),
		NotAfter:  c.NotAfter.UTC(),
		SHA256:    hotcert.FingerprintOf(c).String(),
		IsCA:      c.IsCA,
	}
	for _, ip := range c.IPAddresses {
		d.IPAddresses = append(d.IPAddresses, ip.String())
	}
	for _, u := range c.URIs {
		d.URIs = append(d.URIs, u.String())
	}
	return d
}

// DescribeAll describes every certificate of cs.
func DescribeAll(cs []*x509.Certificate) []Certificate {
	out := make([]Certificate, 0, len(cs))
	for _, c := range cs {
		out = append(out, Describe(c))
	}
	return out
}

// SHA256Colon returns the fingerprint in openssl's colon format, for people.
func (c Certificate) SHA256Colon() string {
	var fp hotcert.Fingerprint
	if b, err := hex.DecodeString(c.SHA256); err == nil && len(b) == len(fp) {
		copy(fp[:], b)
		return fp.Colon()
	}
	return c.SHA256
}

// SANs renders the subject alternative names as openssl does ("DNS:a, IP Address:b").
func (c Certificate) SANs() string {
	var parts []string
	for _, n := range c.DNSNames {
		parts = append(parts, "DNS:"+n)
	}
	for _, n := range c.IPAddresses {
		parts = append(parts, "IP Address:"+n)
	}
	for _, n := range c.URIs {
		parts = append(parts, "URI:"+n)
	}
	for _, n := range c.Emails {
		parts = append(parts, "email:"+n)
	}
	if len(parts) == 0 {
		return "(none)"
	}
	return strings.Join(parts, ", ")
}

// Validity renders the validity window and how it relates to now.
func (c Certificate) Validity(now time.Time) string {
	w := fmt.Sprintf("%s to %s", c.NotBefore.Format(time.RFC3339), c.NotAfter.Format(time.RFC3339))
	switch {
	case now.Before(c.NotBefore):
		return w + fmt.Sprintf(" (NOT YET VALID: starts in %s)", roundDuration(c.NotBefore.Sub(now)))
	case now.After(c.NotAfter):
		return w + fmt.Sprintf(" (EXPIRED %s ago)", roundDuration(now.Sub(c.NotAfter)))
	default:
		return w + fmt.Sprintf(" (expires in %s)", roundDuration(c.NotAfter.Sub(now)))
	}
}

func roundDuration(d time.Duration) string {
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	case d >= time.Minute:
		return d.Round(time.Minute).String()
	default:
		return d.Round(time.Second).String()
	}
}
