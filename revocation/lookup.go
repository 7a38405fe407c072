package revocation

import (
	"math/big"

	"github.com/hotcert/hotcert"
)

// RevokesSerialOf reports whether the list revokes the certificate with serial
// that issuer (the SHA-256 of the issuing CA's certificate) issued, by a deny-list
// entry or a CRL entry: the question "is this certificate on the list?" asked of a
// list without the certificate at hand (a controller that reads the list a fleet
// enforces and proves it refuses a given serial).
func (l *List) RevokesSerialOf(issuer hotcert.Fingerprint, serial *big.Int) bool {
	if l == nil || serial == nil {
		return false
	}
	_, ok := l.serials[issuer][hotcert.FormatSerial(serial)]
	return ok
}

// DeniesSPKI reports whether the list names the public key whose
// SubjectPublicKeyInfo has SHA-256 sum (a spki entry).
func (l *List) DeniesSPKI(sum [32]byte) bool {
	if l == nil {
		return false
	}
	_, ok := l.spki[sum]
	return ok
}
