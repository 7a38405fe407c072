package mirror

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io/fs"

	"software.sslmate.com/src/go-pkcs12"

	"github.com/hotcert/hotcert"
)

// The names of the files a Mirror writes: a Kubernetes TLS Secret's for PEM, and
// the names cert-manager gives a Certificate's PKCS#12 keystore and truststore.
const (
	CertFile       = "tls.crt"
	KeyFile        = "tls.key"
	CAFile         = "ca.crt"
	KeystoreFile   = "keystore.p12"
	TruststoreFile = "truststore.p12"
)

// output is one file of an update.
type output struct {
	name string
	data []byte
	mode fs.FileMode
	// key identifies what the file was made of: equal keys need no rewrite. It is
	// the SHA-256 of the file's inputs, not of its bytes, since PKCS#12 encoding is
	// salted (every encoding of the same inputs differs).
	key [32]byte
}

// render returns the files m and password make, in the order they are renamed
// into the directory: trust before identity (a CA rotation adds the new CA
// before a leaf it issued is served), and tls.key before tls.crt, so that a
// program that re-reads both on a change of the certificate finds the key that
// matches it. PEM files are always made, the PKCS#12 files when pkcs12On. m is validated Material; nothing else ever
// reaches render.
func render(m *hotcert.Material, pkcs12On bool, password string, c *config) ([]output, error) {
	var outs []output
	if m.HasTrust() {
		cas := m.TrustCertificates()
		bundle := hotcert.EncodeCertificates(cas...)
		outs = append(outs, output{name: CAFile, data: bundle, mode: c.fileMode, key: sha256.Sum256(bundle)})
		if pkcs12On {
			entries := make([]pkcs12.TrustStoreEntry, len(cas))
			for i, ca := range cas {
				// The alias is the fingerprint's start: during a CA rotation the old
				// and the new CA often share a subject, and a keystore's aliases
				// must differ.
				entries[i] = pkcs12.TrustStoreEntry{Cert: ca, FriendlyName: "ca-" + m.TrustFingerprints()[i].String()[:16]}
			}
			p12, err := pkcs12.Modern.EncodeTrustStoreEntries(entries, password)
			if err != nil {
				return nil, fmt.Errorf("mirror: encoding %s: %w", TruststoreFile, err)
			}
			outs = append(outs, output{name: TruststoreFile, data: p12, mode: c.fileMode, key: inputsKey(password, bundle)})
		}
	}
	if m.HasIdentity() {
		tc := m.Certificate()
		keyDER, err := x509.MarshalPKCS8PrivateKey(tc.PrivateKey)
		if err != nil {
			return nil, fmt.Errorf("mirror: encoding %s: %w", KeyFile, err)
		}
		keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
		chain := hotcert.EncodeCertificates(m.Chain()...)
		outs = append(outs,
			output{name: KeyFile, data: keyPEM, mode: c.keyMode, key: sha256.Sum256(keyPEM)},
			output{name: CertFile, data: chain, mode: c.fileMode, key: sha256.Sum256(chain)})
		if pkcs12On {
			p12, err := pkcs12.Modern.Encode(tc.PrivateKey, m.Leaf(), m.Chain()[1:], password)
			if err != nil {
				return nil, fmt.Errorf("mirror: encoding %s: %w", KeystoreFile, err)
			}
			outs = append(outs, output{name: KeystoreFile, data: p12, mode: c.keyMode, key: inputsKey(password, keyDER, chain)})
		}
	}
	return outs, nil
}

// inputsKey identifies a PKCS#12 file by its password and contents.
func inputsKey(password string, parts ...[]byte) [32]byte {
	ins := []hotcert.Input{{Name: "password", Data: []byte(password)}}
	for _, p := range parts {
		ins = append(ins, hotcert.Input{Name: "part", Data: p})
	}
	return hotcert.HashInputs(ins...)
}
