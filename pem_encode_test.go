package hotcert_test

import (
	"testing"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
)

// EncodeCertificates writes a bundle ParseCertificates reads back, in order.
func TestEncodeCertificates(t *testing.T) {
	a, b := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	got, err := hotcert.ParseCertificates(hotcert.Input{Name: "bundle", Data: hotcert.EncodeCertificates(a.Cert, b.Cert)})
	if err != nil || len(got) != 2 || !got[0].Equal(a.Cert) || !got[1].Equal(b.Cert) {
		t.Fatalf("read back %d certificates (%v), want the two in order", len(got), err)
	}
	if out := hotcert.EncodeCertificates(); len(out) != 0 {
		t.Errorf("no certificates encoded as %q", out)
	}
}
