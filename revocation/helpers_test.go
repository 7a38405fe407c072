package revocation_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
)

// trustOf returns validated Material holding the bundle of cas.
func trustOf(t testing.TB, cas ...*hotcerttest.CA) *hotcert.Material {
	t.Helper()
	m, err := hotcert.Validate(hotcert.Content{CA: hotcert.Input{Name: "ca.crt", Data: hotcerttest.BundlePEM(cas...)}})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// serialLine is the deny-list entry revoking leaf by serial.
func serialLine(leaf *hotcerttest.Leaf) string {
	return fmt.Sprintf("serial %s issuer %s\n", hotcert.FormatSerial(leaf.Cert.SerialNumber), hotcert.FingerprintOf(leaf.Issuer.Cert))
}

// spkiLine is the deny-list entry listing leaf's public key.
func spkiLine(leaf *hotcerttest.Leaf) string {
	h := sha256.Sum256(leaf.Cert.RawSubjectPublicKeyInfo)
	return "spki " + hex.EncodeToString(h[:]) + "\n"
}
