package hotcert

import (
	"crypto/x509"
	"time"
)

// Summary says what a Material holds, with public data only: for status endpoints,
// metrics and the reports agents send their control plane during a CA rotation.
// Get one with [Material.Summary], e.g. reloader.Status().Current.Summary().
type Summary struct {
	// Leaf describes the identity's leaf certificate (nil without identity).
	Leaf *CertificateSummary `json:"leaf,omitempty"`
	// CAs describes every CA of the trust bundle, in bundle order (nil without trust).
	CAs        []CertificateSummary `json:"cas,omitempty"`
	Source     string               `json:"source"`
	Generation uint64               `json:"generation"`
	LoadedAt   time.Time            `json:"loaded_at"`
}

// CertificateSummary identifies one certificate.
type CertificateSummary struct {
	// SHA256 is the fingerprint of the DER encoding, lower-case hex ([Fingerprint.String]).
	SHA256 string `json:"sha256"`
	// Serial is printed as `openssl x509 -serial` prints it ([FormatSerial]).
	Serial   string    `json:"serial"`
	Subject  string    `json:"subject"`
	Issuer   string    `json:"issuer"`
	NotAfter time.Time `json:"not_after"`
}

// Summary describes what m holds. It is safe on a nil *Material (zero Summary).
func (m *Material) Summary() Summary {
	s := Summary{Source: m.Source(), Generation: m.Generation(), LoadedAt: m.LoadedAt().UTC()}
	if l := m.Leaf(); l != nil {
		c := summarize(l, m.LeafFingerprint())
		s.Leaf = &c
	}
	fps := m.TrustFingerprints()
	for i, ca := range m.TrustCertificates() {
		s.CAs = append(s.CAs, summarize(ca, fps[i]))
	}
	return s
}

func summarize(c *x509.Certificate, fp Fingerprint) CertificateSummary {
	return CertificateSummary{
		SHA256:   fp.String(),
		Serial:   FormatSerial(c.SerialNumber),
		Subject:  c.Subject.String(),
		Issuer:   c.Issuer.String(),
		NotAfter: c.NotAfter.UTC(),
	}
}
