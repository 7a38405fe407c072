package metrics_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/metrics"
)

// TestLeafLifetime: a Reloader serving a leaf exports the leaf's NotBefore
// next to its NotAfter (the lifetime alerts divide by their difference), a
// renewal moves both, and a trust-only bundle has no NotBefore series. The
// names follow the Recorder's options.
func TestLeafLifetime(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	ca := hotcerttest.MustNewCA()
	leaf := ca.MustIssue(hotcerttest.WithValidity(now.Add(-10*time.Minute), now.Add(50*time.Minute)))
	reg := prometheus.NewPedanticRegistry()
	rec, err := metrics.New(reg, metrics.WithPrefix("dexaflow"), metrics.WithComponentLabel("listener"))
	if err != nil {
		t.Fatal(err)
	}
	for component, c := range map[string]hotcert.Content{
		"agent_grpc": {Cert: hotcert.Input{Name: "c", Data: leaf.ChainPEM}, Key: hotcert.Input{Name: "k", Data: leaf.KeyPEM}},
		"agent_ca":   {CA: hotcert.Input{Name: "ca", Data: ca.CertPEM}},
	} {
		r, err := hotcert.New(context.Background(), staticSource{c}, hotcert.WithObserver(rec), hotcert.WithComponent(component))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
	}
	check := func(nb, na time.Time) {
		t.Helper()
		want := fmt.Sprintf(`
# HELP dexaflow_tls_cert_not_before_seconds NotBefore of the leaf certificate in use, Unix seconds (no series for a trust-only bundle).
# TYPE dexaflow_tls_cert_not_before_seconds gauge
dexaflow_tls_cert_not_before_seconds{listener="agent_grpc"} %d
# HELP dexaflow_tls_cert_not_after_seconds NotAfter of the certificate in use (the earliest CA NotAfter for a trust-only bundle), Unix seconds.
# TYPE dexaflow_tls_cert_not_after_seconds gauge
dexaflow_tls_cert_not_after_seconds{listener="agent_ca"} %d
dexaflow_tls_cert_not_after_seconds{listener="agent_grpc"} %d
`, nb.Unix(), ca.Cert.NotAfter.Unix(), na.Unix())
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
			"dexaflow_tls_cert_not_before_seconds", "dexaflow_tls_cert_not_after_seconds"); err != nil {
			t.Fatal(err)
		}
	}
	check(now.Add(-10*time.Minute), now.Add(50*time.Minute))

	renewed := ca.MustIssue(hotcerttest.WithValidity(now.Add(30*time.Minute), now.Add(90*time.Minute)))
	m, err := hotcert.Validate(hotcert.Content{Cert: hotcert.Input{Name: "c", Data: renewed.ChainPEM}, Key: hotcert.Input{Name: "k", Data: renewed.KeyPEM}},
		hotcert.WithClock(func() time.Time { return now.Add(35 * time.Minute) }))
	if err != nil {
		t.Fatal(err)
	}
	rec.ObserveLoad("agent_grpc", m, false)
	check(now.Add(30*time.Minute), now.Add(90*time.Minute))
}
