package hotcert_test

import (
	"math/big"
	"testing"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
)

// TestSummarySaysWhatTheReloaderHolds: the summary names the leaf (openssl serial,
// fingerprint, issuer, NotAfter) and every CA of the bundle, and follows a swap with
// the generation.
func TestSummarySaysWhatTheReloaderHolds(t *testing.T) {
	oldCA := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2025"))
	newCA := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2026"))
	leaf := oldCA.MustIssue(hotcerttest.WithSerial(big.NewInt(0x0abc)))
	content := func(l *hotcerttest.Leaf, cas ...*hotcerttest.CA) hotcert.Content {
		return hotcert.Content{
			Cert: hotcert.Input{Name: "tls.crt", Data: l.ChainPEM}, Key: hotcert.Input{Name: "tls.key", Data: l.KeyPEM},
			CA: hotcert.Input{Name: "ca.crt", Data: hotcerttest.BundlePEM(cas...)}, Source: "memory",
		}
	}
	h := startReloader(t, content(leaf, oldCA))
	s := h.r.Status().Current.Summary()
	if s.Leaf == nil || s.Leaf.Serial != "0ABC" || s.Leaf.SHA256 != hotcert.FingerprintOf(leaf.Cert).String() ||
		s.Leaf.Issuer != oldCA.Cert.Subject.String() || !s.Leaf.NotAfter.Equal(leaf.Cert.NotAfter) || s.Generation != 1 || s.LoadedAt.IsZero() {
		t.Fatalf("first summary: %+v leaf %+v", s, s.Leaf)
	}
	if len(s.CAs) != 1 || s.CAs[0].SHA256 != hotcert.FingerprintOf(oldCA.Cert).String() || s.CAs[0].Subject != oldCA.Cert.Subject.String() {
		t.Fatalf("first summary CAs: %+v", s.CAs)
	}

	renewed := newCA.MustIssue()
	h.src.Set(content(renewed, newCA, oldCA), nil)
	testutil.WaitFor(t, "the swap", func() bool { return h.r.Current().Generation() == 2 })
	s = h.r.Current().Summary()
	if s.Leaf.SHA256 != hotcert.FingerprintOf(renewed.Cert).String() || s.Leaf.Issuer != newCA.Cert.Subject.String() || len(s.CAs) != 2 ||
		s.CAs[0].Subject != newCA.Cert.Subject.String() || s.CAs[1].SHA256 != hotcert.FingerprintOf(oldCA.Cert).String() {
		t.Fatalf("summary after the swap: %+v leaf %+v", s, s.Leaf)
	}

	var empty *hotcert.Material
	if z := empty.Summary(); z.Leaf != nil || z.CAs != nil || z.Generation != 0 {
		t.Fatalf("nil material summary: %+v", z)
	}
}
