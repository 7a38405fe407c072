package revocation_test

import (
	"crypto/sha256"
	"math/big"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/revocation"
)

// TestListLookups: a serial is on the list only under its issuer (deny-list and
// CRL entries alike), a key only by its SPKI hash.
func TestListLookups(t *testing.T) {
	ca, other := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	bySerial, byKey, byCRL, kept := ca.MustIssue(), ca.MustIssue(), ca.MustIssue(), ca.MustIssue()
	crl := ca.MustCRL(1, time.Now().Add(-time.Minute), time.Now().Add(time.Hour), byCRL.Cert.SerialNumber)
	l, err := revocation.Validate(revocation.Content{
		DenyList: hotcert.Input{Name: "deny.list", Data: []byte(serialLine(bySerial) + spkiLine(byKey))},
		CRLs:     hotcert.Input{Name: "ca.crl", Data: crl},
	}, trustOf(t, ca), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	issuer := hotcert.FingerprintOf(ca.Cert)
	for _, c := range []struct {
		name   string
		issuer hotcert.Fingerprint
		serial *big.Int
		want   bool
	}{
		{"deny-list serial", issuer, bySerial.Cert.SerialNumber, true},
		{"CRL serial", issuer, byCRL.Cert.SerialNumber, true},
		{"serial not listed", issuer, kept.Cert.SerialNumber, false},
		{"listed serial, other issuer", hotcert.FingerprintOf(other.Cert), bySerial.Cert.SerialNumber, false},
		{"nil serial", issuer, nil, false},
	} {
		if got := l.RevokesSerialOf(c.issuer, c.serial); got != c.want {
			t.Errorf("%s: RevokesSerialOf = %v, want %v", c.name, got, c.want)
		}
	}
	if !l.DeniesSPKI(sha256.Sum256(byKey.Cert.RawSubjectPublicKeyInfo)) {
		t.Error("the listed key is not denied")
	}
	if l.DeniesSPKI(sha256.Sum256(kept.Cert.RawSubjectPublicKeyInfo)) {
		t.Error("a key not listed is denied")
	}
	var none *revocation.List
	if none.RevokesSerialOf(issuer, bySerial.Cert.SerialNumber) || none.DeniesSPKI([32]byte{}) {
		t.Error("a nil list denies something")
	}
}
