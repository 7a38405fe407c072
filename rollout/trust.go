package rollout

import (
	"crypto/x509"
	"fmt"
	"time"

	"github.com/hotcert/hotcert"
)

// AnnotationTrustedBy, on a server certificate Secret (tls.crt), declares the
// CA bundles its clients verify it against: a comma-separated list of
// "Kind/name/key" in the Secret's namespace ("ConfigMap/ca-bundle/ca.crt",
// "Secret/client-trust/ca.crt"). The controller's trust guard then does not
// roll the workloads consuming the Secret onto a leaf a declared bundle does
// not trust, nor the workloads consuming a declared bundle onto a bundle that
// does not trust the Secret's current leaf.
const AnnotationTrustedBy = "hotcert.dev/trusted-by"

// CheckTrust reports whether the certificate chain (leaf first) verifies
// against the CA bundle, with hotcert's PEM grammar for both. Only trust is
// judged, not usage or time: the chain is verified at now, moved inside the
// leaf's validity window if it lies outside (validity is CheckTLS's concern).
// The error names both inputs and the leaf's issuer, never their data.
func CheckTrust(chain, bundle hotcert.Input, now time.Time) error {
	certs, err := hotcert.ParseCertificates(chain)
	if err != nil {
		return err
	}
	cas, err := hotcert.ParseCertificates(bundle)
	if err != nil {
		return err
	}
	roots := x509.NewCertPool()
	for _, c := range cas {
		roots.AddCert(c)
	}
	leaf := certs[0]
	at := now
	if at.Before(leaf.NotBefore) {
		at = leaf.NotBefore
	}
	if at.After(leaf.NotAfter) {
		at = leaf.NotAfter
	}
	if _, err := hotcert.VerifyChain(certs, x509.VerifyOptions{Roots: roots, CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return fmt.Errorf("the leaf of %s (issuer %q, serial %s) is not trusted by %s", chain.Name, leaf.Issuer.String(), hotcert.FormatSerial(leaf.SerialNumber), bundle.Name)
	}
	return nil
}
