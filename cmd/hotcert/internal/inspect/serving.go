package inspect

import (
	"crypto/x509"
	"slices"
)

// servingWarnings says what about a key pair's leaf makes it a poor serving
// certificate although the reloader loads it (hotcert.Validate checks material,
// not its purpose): a CA certificate used as the pair (CA:TRUE), no name a client
// verifies (no subjectAltName: Go ignores the subject's CN), extended key usages
// that leave out serverAuth. A client certificate checked with check gets the
// last two too; they say so.
func servingWarnings(leaf *x509.Certificate) []string {
	var w []string
	if leaf.IsCA {
		w = append(w, "the certificate is a CA certificate (basicConstraints CA:TRUE), not one issued for a server: issue a leaf from this CA and serve that")
	}
	if len(leaf.DNSNames) == 0 && len(leaf.IPAddresses) == 0 && len(leaf.URIs) == 0 {
		w = append(w, "the certificate names no DNS name or IP address (no subjectAltName): clients that verify the server's name refuse it (Go ignores the subject's CN); fine only for a client certificate")
	}
	if len(leaf.ExtKeyUsage) > 0 && !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth) && !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageAny) {
		w = append(w, "the certificate's extended key usages leave out serverAuth: clients refuse it as a server certificate; fine only for a client certificate")
	}
	return w
}
