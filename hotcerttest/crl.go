package hotcerttest

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"math/big"
	"time"
)

// CRL returns a PEM "X509 CRL" signed by ca, numbered number, valid from
// thisUpdate to nextUpdate, revoking serials.
func (ca *CA) CRL(number int64, thisUpdate, nextUpdate time.Time, serials ...*big.Int) ([]byte, error) {
	tmpl := &x509.RevocationList{Number: big.NewInt(number), ThisUpdate: thisUpdate, NextUpdate: nextUpdate}
	for _, s := range serials {
		tmpl.RevokedCertificateEntries = append(tmpl.RevokedCertificateEntries,
			x509.RevocationListEntry{SerialNumber: s, RevocationTime: thisUpdate})
	}
	der, err := x509.CreateRevocationList(rand.Reader, tmpl, ca.Cert, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("hotcerttest: CRL: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der}), nil
}

// MustCRL is like [CA.CRL] but panics on error.
func (ca *CA) MustCRL(number int64, thisUpdate, nextUpdate time.Time, serials ...*big.Int) []byte {
	return must(ca.CRL(number, thisUpdate, nextUpdate, serials...))
}
