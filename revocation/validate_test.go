package revocation_test

import (
	"crypto/x509"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/revocation"
)

func denyList(s string) revocation.Content {
	return revocation.Content{DenyList: hotcert.Input{Name: "deny.list", Data: []byte(s)}, Source: "test"}
}

func crlContent(pem []byte) revocation.Content {
	return revocation.Content{CRLs: hotcert.Input{Name: "ca.crl", Data: pem}, Source: "test"}
}

// wantDenied checks l's verdict on leaf's chain: denied for why, or allowed ("").
func wantDenied(t *testing.T, l *revocation.List, name string, chain []*x509.Certificate, why string) {
	t.Helper()
	err := l.Check(chain)
	var de *revocation.DeniedError
	switch {
	case why == "" && err != nil:
		t.Errorf("%s: refused: %v", name, err)
	case why != "" && (!errors.As(err, &de) || de.Why != why):
		t.Errorf("%s: got %v, want a %s denial", name, err, why)
	}
}

func TestDenyListBySerialAndSPKI(t *testing.T) {
	ca, other := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	inter := ca.MustNewIntermediate()
	bySerial, bySPKI, kept := ca.MustIssue(), ca.MustIssue(), ca.MustIssue()
	sameSerial := other.MustIssue(hotcerttest.WithSerial(bySerial.Cert.SerialNumber)) // another issuer: another certificate
	below := inter.MustIssue()
	list := "# revoked\n\n" + serialLine(bySerial) + spkiLine(bySPKI) +
		"spki " + strings.TrimSpace(strings.TrimPrefix(spkiLine(&hotcerttest.Leaf{Cert: inter.Cert}), "spki ")) + "\n"
	l, err := revocation.Validate(denyList(list), nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	wantDenied(t, l, "serial", []*x509.Certificate{bySerial.Cert, ca.Cert}, "serial")
	wantDenied(t, l, "spki", []*x509.Certificate{bySPKI.Cert, ca.Cert}, "spki")
	wantDenied(t, l, "kept", []*x509.Certificate{kept.Cert, ca.Cert}, "")
	wantDenied(t, l, "same serial, other issuer", []*x509.Certificate{sameSerial.Cert, other.Cert}, "")
	wantDenied(t, l, "chain through a listed intermediate", []*x509.Certificate{below.Cert, inter.Cert, ca.Cert}, "spki")
	if in := l.Info(); in.Serials != 1 || in.SPKIs != 2 || len(in.Version) != 16 {
		t.Errorf("info %+v", in)
	}
	if !l.Revokes(bySerial.Cert.SerialNumber) || l.Revokes(kept.Cert.SerialNumber) {
		t.Error("Revokes")
	}
	var nilList *revocation.List
	if nilList.Check([]*x509.Certificate{bySerial.Cert, ca.Cert}) != nil {
		t.Error("a nil list denies")
	}
}

func TestDenyListGarbageRefused(t *testing.T) {
	for name, s := range map[string]string{
		"empty":          "",
		"unknown entry":  "deny everything\n",
		"bad serial":     "serial XYZ issuer " + strings.Repeat("ab", 32) + "\n",
		"short issuer":   "serial 0A issuer abcd\n",
		"missing issuer": "serial 0A\n",
		"bad spki":       "spki 1234\n",
		"binary":         "\x00\x01\x02garbage",
	} {
		_, err := revocation.Validate(denyList(s), nil, time.Now())
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if !strings.HasPrefix(err.Error(), "deny.list: ") {
			t.Errorf("%s: error does not name the input: %v", name, err)
		}
	}
	if _, err := revocation.Validate(denyList("# nothing revoked\n"), nil, time.Now()); err != nil {
		t.Errorf("a list of comments: %v", err)
	}
}

func TestCRL(t *testing.T) {
	now := time.Now()
	ca := hotcerttest.MustNewCA(hotcerttest.WithCommonName("fleet CA"))
	revoked, kept := ca.MustIssue(), ca.MustIssue()
	trust := trustOf(t, ca)
	good := ca.MustCRL(7, now.Add(-time.Hour), now.Add(time.Hour), revoked.Cert.SerialNumber)

	l, err := revocation.Validate(crlContent(good), trust, now)
	if err != nil {
		t.Fatal(err)
	}
	wantDenied(t, l, "revoked", []*x509.Certificate{revoked.Cert, ca.Cert}, "serial")
	wantDenied(t, l, "kept", []*x509.Certificate{kept.Cert, ca.Cert}, "")
	if in := l.Info(); len(in.CRLs) != 1 || in.CRLs[0].Number != "7" || in.CRLs[0].Entries != 1 {
		t.Errorf("info %+v", in)
	}

	// A CRL signed by another key under the same name (a forgery), or by a CA the
	// bundle does not hold, is refused.
	forger := hotcerttest.MustNewCA(hotcerttest.WithCommonName("fleet CA"))
	forged := forger.MustCRL(8, now.Add(-time.Hour), now.Add(time.Hour), kept.Cert.SerialNumber)
	if _, err := revocation.Validate(crlContent(forged), trust, now); hotcert.ReasonOf(err) != revocation.ReasonSignature {
		t.Errorf("forged CRL: %v", err)
	}
	stranger := hotcerttest.MustNewCA().MustCRL(1, now.Add(-time.Hour), now.Add(time.Hour), big.NewInt(1))
	if _, err := revocation.Validate(crlContent(stranger), trust, now); hotcert.ReasonOf(err) != revocation.ReasonSignature {
		t.Errorf("CRL of a CA outside the bundle: %v", err)
	}
	if _, err := revocation.Validate(crlContent(good), nil, now); hotcert.ReasonOf(err) != revocation.ReasonSignature {
		t.Errorf("CRL without a bundle: %v", err)
	}
	// A CRL whose NextUpdate has passed is refused.
	stale := ca.MustCRL(6, now.Add(-2*time.Hour), now.Add(-time.Minute), revoked.Cert.SerialNumber)
	if _, err := revocation.Validate(crlContent(stale), trust, now); hotcert.ReasonOf(err) != revocation.ReasonStale {
		t.Errorf("stale CRL: %v", err)
	}
	// Garbage, a cut PEM block, a certificate where a CRL belongs.
	for name, data := range map[string][]byte{
		"garbage":     []byte("not a CRL"),
		"cut":         good[:len(good)/2],
		"certificate": ca.CertPEM,
	} {
		if _, err := revocation.Validate(crlContent(data), trust, now); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
