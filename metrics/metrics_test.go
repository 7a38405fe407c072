package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/metrics"
)

type staticSource struct{ c hotcert.Content }

func (s staticSource) Read(context.Context) (hotcert.Content, error) { return s.c, nil }
func (staticSource) Watch(ctx context.Context, _ func()) error       { <-ctx.Done(); return nil }
func (staticSource) String() string                                  { return "static" }

func material(t *testing.T, ca *hotcerttest.CA, bundle ...*hotcerttest.CA) *hotcert.Material {
	t.Helper()
	l := ca.MustIssue()
	c := hotcert.Content{Cert: hotcert.Input{Name: "c", Data: l.ChainPEM}, Key: hotcert.Input{Name: "k", Data: l.KeyPEM}}
	if len(bundle) > 0 {
		c.CA = hotcert.Input{Name: "ca", Data: hotcerttest.BundlePEM(bundle...)}
	}
	m, err := hotcert.Validate(c)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestDefaultNames(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	rec, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	ca, other := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	m := material(t, ca, ca, other)
	rec.ObserveLoad("agent_grpc", m, true)
	rec.ObserveLoad("agent_grpc", m, false)
	rec.ObserveFailure("agent_grpc", errors.New("bad"))

	want := fmt.Sprintf(`
# HELP hotcert_tls_ca_bundle_certificates Number of CA certificates in the trust bundle in use.
# TYPE hotcert_tls_ca_bundle_certificates gauge
hotcert_tls_ca_bundle_certificates{component="agent_grpc"} 2
# HELP hotcert_tls_cert_not_after_seconds NotAfter of the certificate in use (the earliest CA NotAfter for a trust-only bundle), Unix seconds.
# TYPE hotcert_tls_cert_not_after_seconds gauge
hotcert_tls_cert_not_after_seconds{component="agent_grpc"} %d
# HELP hotcert_tls_cert_reload_total TLS material reloads by result: one per distinct content change or distinct bad content.
# TYPE hotcert_tls_cert_reload_total counter
hotcert_tls_cert_reload_total{component="agent_grpc",result="failure"} 1
hotcert_tls_cert_reload_total{component="agent_grpc",result="success"} 1
# HELP hotcert_tls_reload_failures_total TLS material that failed to load while the last good material kept serving. Alert on any increase.
# TYPE hotcert_tls_reload_failures_total counter
hotcert_tls_reload_failures_total{component="agent_grpc"} 1
`, m.NotAfter().Unix())
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"hotcert_tls_ca_bundle_certificates", "hotcert_tls_cert_not_after_seconds",
		"hotcert_tls_cert_reload_total", "hotcert_tls_reload_failures_total"); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "hotcert_tls_cert_last_reload_timestamp_seconds"); err != nil || n != 1 {
		t.Fatalf("last reload gauge: %d series, %v", n, err)
	}
}

func TestInitialLoadCreatesZeroCounters(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	rec, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := hotcert.New(context.Background(), staticSource{hotcert.Content{CA: hotcert.Input{Name: "ca", Data: hotcerttest.BundlePEM(hotcerttest.MustNewCA())}}},
		hotcert.WithObserver(rec), hotcert.WithComponent("agent_ca"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	want := `
# HELP hotcert_tls_reload_failures_total TLS material that failed to load while the last good material kept serving. Alert on any increase.
# TYPE hotcert_tls_reload_failures_total counter
hotcert_tls_reload_failures_total{component="agent_ca"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "hotcert_tls_reload_failures_total"); err != nil {
		t.Fatal(err)
	}
	if n, _ := testutil.GatherAndCount(reg, "hotcert_tls_cert_reload_total"); n != 2 {
		t.Fatalf("reload_total has %d series after the first load, want success and failure at 0", n)
	}
}

func TestProductNames(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	rec, err := metrics.New(reg, metrics.WithPrefix("dexaflow"), metrics.WithComponentLabel("listener"))
	if err != nil {
		t.Fatal(err)
	}
	rec.ObserveFailure("agent_grpc", errors.New("bad"))
	want := `
# HELP dexaflow_tls_reload_failures_total TLS material that failed to load while the last good material kept serving. Alert on any increase.
# TYPE dexaflow_tls_reload_failures_total counter
dexaflow_tls_reload_failures_total{listener="agent_grpc"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "dexaflow_tls_reload_failures_total"); err != nil {
		t.Fatal(err)
	}

	reg2 := prometheus.NewPedanticRegistry()
	rec2, err := metrics.New(reg2, metrics.WithPrefix("argocd_agent"), metrics.WithResultValues("success", "error"))
	if err != nil {
		t.Fatal(err)
	}
	rec2.ObserveFailure("principal", errors.New("bad"))
	want2 := `
# HELP argocd_agent_tls_cert_reload_total TLS material reloads by result: one per distinct content change or distinct bad content.
# TYPE argocd_agent_tls_cert_reload_total counter
argocd_agent_tls_cert_reload_total{component="principal",result="error"} 1
`
	if err := testutil.GatherAndCompare(reg2, strings.NewReader(want2), "argocd_agent_tls_cert_reload_total"); err != nil {
		t.Fatal(err)
	}
	if _, err := metrics.New(nil, metrics.WithResultValues("x", "x")); err == nil {
		t.Fatal("identical result values accepted")
	}
}
