package metrics_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/metrics"
)

// TestHeldSeriesFollowTheSwap: one leaf series per component and one series per CA
// of the bundle; a swap removes the previous material's series.
func TestHeldSeriesFollowTheSwap(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	rec, err := metrics.New(reg, metrics.WithComponentLabel("listener"))
	if err != nil {
		t.Fatal(err)
	}
	oldCA := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2025"))
	newCA := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2026"))
	before := material(t, oldCA, oldCA)
	after := material(t, newCA, newCA, oldCA)
	rec.ObserveLoad("agent_grpc", before, true)
	rec.ObserveLoad("other", before, true)
	rec.ObserveLoad("agent_grpc", after, false)

	leafLine := func(component string, m *hotcert.Material) string {
		l := m.Leaf()
		return fmt.Sprintf("hotcert_tls_cert_info{issuer=%q,listener=%q,serial=%q,sha256=%q} 1\n",
			l.Issuer.String(), component, hotcert.FormatSerial(l.SerialNumber), m.LeafFingerprint())
	}
	caLine := func(component string, ca *hotcerttest.CA) string {
		return fmt.Sprintf("hotcert_tls_ca_certificate_info{listener=%q,sha256=%q,subject=%q} 1\n",
			component, hotcert.FingerprintOf(ca.Cert), ca.Cert.Subject.String())
	}
	want := "# HELP hotcert_tls_ca_certificate_info One series (value 1) per CA of the trust bundle in use: SHA-256 fingerprint and subject.\n" +
		"# TYPE hotcert_tls_ca_certificate_info gauge\n"
	// Sorted by label values: the fingerprints decide the order of one component's CAs.
	cas := []string{caLine("agent_grpc", newCA), caLine("agent_grpc", oldCA)}
	if cas[0] > cas[1] {
		cas[0], cas[1] = cas[1], cas[0]
	}
	want += strings.Join(cas, "") + caLine("other", oldCA)
	want += "# HELP hotcert_tls_cert_info The leaf certificate in use (value 1): SHA-256 fingerprint, serial as openssl prints it, issuer.\n" +
		"# TYPE hotcert_tls_cert_info gauge\n"
	leaves := []string{leafLine("agent_grpc", after), leafLine("other", before)}
	if leaves[0] > leaves[1] {
		leaves[0], leaves[1] = leaves[1], leaves[0]
	}
	want += strings.Join(leaves, "")
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "hotcert_tls_cert_info", "hotcert_tls_ca_certificate_info"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(rec, "hotcert_tls_cert_info", "hotcert_tls_ca_certificate_info"); n != 5 {
		t.Fatalf("%d held series, want 5 (2 leaves, 3 CAs): the previous material's series must be gone", n)
	}
}
