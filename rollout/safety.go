package rollout

import (
	"bytes"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/hotcert/hotcert"
)

// NotYetValidError is the problem of TLS content that is correct but whose
// certificates are not all valid yet (a renewal staged early, an issuer whose
// clock runs ahead). There is no tolerance: pods whose reloaders refuse it must
// not be rolled onto it, so it is rolled out from NotBefore on, when every
// certificate of the chain is valid.
type NotYetValidError struct {
	NotBefore time.Time
	Err       error // what hotcert.Validate said, naming the input
}

func (e *NotYetValidError) Error() string { return e.Err.Error() }

// Unwrap returns what hotcert.Validate said.
func (e *NotYetValidError) Unwrap() error { return e.Err }

// CheckTLS reports, per key, why the TLS content of one Secret or ConfigMap
// version is unusable; keys that are fine, or that hold no TLS content, are absent
// from the result. It checks:
//
//   - a kubernetes.io/tls Secret: tls.crt and tls.key must be a matching pair
//     (hotcert.Validate: every PEM block parses, the key matches the leaf, the
//     chain is inside its validity window); a non-empty ca.crt must parse;
//   - any other key ending in .crt, .pem or .key: every PEM block of it must
//     parse; a private key is checked against the certificate beside it (X.key
//     with X.crt or X.pem, key.pem with cert.pem, privkey.pem with fullchain.pem,
//     or the only certificate of the object), and a .pem holding both a chain and
//     a key is checked as a pair.
//
// PEM follows hotcert's one grammar ([hotcert.DecodePEM]): text outside blocks
// is allowed, every BEGIN block must parse, parameter blocks are skipped. An
// empty .crt or .pem value passes (cert-manager leaves ca.crt empty for ACME
// certificates); PEM blocks other than certificates and private keys (a PUBLIC
// KEY) are not checked beyond their PEM framing. An error for a pair is reported
// under both keys. now is the time validity windows are checked against; a pair
// that is correct but not valid yet at now is a [*NotYetValidError].
func CheckTLS(secretType corev1.SecretType, source string, data map[string][]byte, now time.Time) map[string]error {
	problems := map[string]error{}
	input := func(key string) hotcert.Input {
		return hotcert.Input{Name: source + " key " + key, Data: data[key]}
	}
	checkPair := func(certKey, keyKey string) {
		cert, key := input(certKey), input(keyKey)
		certs, keyBlock, err := splitPEM(cert)
		if err == nil && keyBlock != nil && len(certs) == 0 {
			err = fmt.Errorf("%s holds a private key, not a certificate", cert.Name)
		}
		if err == nil && certKey != keyKey {
			_, keyBlock, err = splitPEM(key)
			if err == nil && keyBlock == nil {
				err = fmt.Errorf("%s holds no private key", key.Name)
			}
		}
		if err == nil {
			err = validatePair(hotcert.Input{Name: cert.Name, Data: certs}, hotcert.Input{Name: key.Name, Data: pem.EncodeToMemory(keyBlock)}, now)
		}
		if err != nil {
			problems[certKey] = err
			problems[keyKey] = err
		}
	}

	paired := map[string]bool{}
	if secretType == corev1.SecretTypeTLS {
		checkPair(corev1.TLSCertKey, corev1.TLSPrivateKeyKey)
		paired[corev1.TLSCertKey], paired[corev1.TLSPrivateKeyKey] = true, true
	}

	// Classify the remaining TLS-looking keys by content.
	var keyFiles, certFiles []string
	for _, k := range sortedKeys(data) {
		if paired[k] || !tlsLooking(k) {
			continue
		}
		in := input(k)
		if len(bytes.TrimSpace(in.Data)) == 0 {
			if strings.HasSuffix(k, ".key") {
				problems[k] = fmt.Errorf("%s: private key is empty", in.Name)
			}
			continue
		}
		certs, keyBlock, err := splitPEM(in)
		switch {
		case err != nil:
			problems[k] = err
		case keyBlock != nil && len(certs) > 0:
			checkPair(k, k) // a combined chain + key file
			paired[k] = true
		case keyBlock != nil:
			if hotcert.IsEncryptedKey(keyBlock) {
				keyFiles = append(keyFiles, k) // cannot be checked without its passphrase
			} else if _, err := hotcert.ParsePrivateKey(hotcert.Input{Name: in.Name, Data: pem.EncodeToMemory(keyBlock)}); err != nil {
				problems[k] = err
			} else {
				keyFiles = append(keyFiles, k)
			}
		case len(certs) > 0:
			// Certificates need not be CAs here.
			if _, err := hotcert.ParseCertificates(hotcert.Input{Name: in.Name, Data: certs}); err != nil {
				problems[k] = err
			} else {
				certFiles = append(certFiles, k)
			}
		}
	}
	for _, k := range keyFiles {
		if c := pairFor(k, keyFiles, certFiles, data); c != "" {
			checkPair(c, k)
		}
	}
	return problems
}

// validatePair runs hotcert.Validate on a certificate chain and its key at now.
// A pair refused only because a certificate is not valid yet is validated again
// at the latest NotBefore of its chain: if it passes then, the problem is a
// *NotYetValidError.
func validatePair(cert, key hotcert.Input, now time.Time) error {
	c := hotcert.Content{Cert: cert, Key: key}
	_, err := hotcert.Validate(c, hotcert.WithClock(func() time.Time { return now }))
	if hotcert.ReasonOf(err) != hotcert.ReasonNotYetValid {
		return err
	}
	certs, perr := hotcert.ParseCertificates(cert)
	if perr != nil {
		return err
	}
	var validFrom time.Time
	for _, c := range certs {
		if c.NotBefore.After(validFrom) {
			validFrom = c.NotBefore
		}
	}
	if _, later := hotcert.Validate(c, hotcert.WithClock(func() time.Time { return validFrom })); later != nil {
		return later
	}
	return &NotYetValidError{NotBefore: validFrom, Err: err}
}

// splitPEM decodes every PEM block of in (hotcert's PEM grammar) once and returns
// the certificate blocks, re-encoded as the chain hotcert.Validate reads, and the
// private key block. It fails when a block is malformed or truncated, when there
// is no block at all, or when there is more than one private key.
func splitPEM(in hotcert.Input) (certs []byte, key *pem.Block, err error) {
	if len(bytes.TrimSpace(in.Data)) == 0 {
		return nil, nil, fmt.Errorf("%s is empty", in.Name)
	}
	blocks, err := hotcert.DecodePEM(in)
	if err != nil {
		return nil, nil, err
	}
	if len(blocks) == 0 {
		return nil, nil, fmt.Errorf("%s holds no PEM block (malformed)", in.Name)
	}
	for _, b := range blocks {
		switch {
		case b.Type == "CERTIFICATE":
			certs = append(certs, pem.EncodeToMemory(b)...)
		case strings.HasSuffix(b.Type, "PRIVATE KEY"):
			if key != nil {
				return nil, nil, fmt.Errorf("%s holds more than one private key", in.Name)
			}
			key = b
		}
	}
	return certs, key, nil
}

// pairFor finds the certificate file that goes with private key file k.
func pairFor(k string, keyFiles, certFiles []string, data map[string][]byte) string {
	stem := strings.TrimSuffix(strings.TrimSuffix(k, ".key"), ".pem")
	var candidates []string
	switch {
	case strings.HasSuffix(k, ".key"):
		candidates = []string{stem + ".crt", stem + ".pem"}
	case stem == "key":
		candidates = []string{"cert.pem", "crt.pem", "certificate.pem"}
	case stem == "privkey":
		candidates = []string{"fullchain.pem", "cert.pem"}
	default:
		for _, sep := range []string{"-", "_", "."} {
			if base, ok := strings.CutSuffix(stem, sep+"key"); ok {
				candidates = []string{base + sep + "cert.pem", base + sep + "crt.pem", base + ".pem", base + ".crt"}
				break
			}
		}
	}
	for _, c := range candidates {
		if slices.Contains(certFiles, c) {
			return c
		}
	}
	// One key and one leaf certificate: they go together.
	if len(keyFiles) == 1 {
		var leaves []string
		for _, c := range certFiles {
			if isLeafPEM(data[c]) {
				leaves = append(leaves, c)
			}
		}
		if len(leaves) == 1 {
			return leaves[0]
		}
	}
	return ""
}

func isLeafPEM(data []byte) bool {
	certs, err := hotcert.ParseCertificates(hotcert.Input{Data: data})
	return err == nil && !certs[0].IsCA
}

func tlsLooking(key string) bool {
	return strings.HasSuffix(key, ".crt") || strings.HasSuffix(key, ".pem") || strings.HasSuffix(key, ".key")
}
