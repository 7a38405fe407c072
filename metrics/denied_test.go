package metrics_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hotcert/hotcert/metrics"
)

// TestDeniedConnectionsAskedAtScrape: the count is read at each scrape, one
// series per component, under the process's own prefix and label.
func TestDeniedConnectionsAskedAtScrape(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	d, err := metrics.NewDenyList(reg, metrics.WithPrefix("dexaflow"), metrics.WithComponentLabel("listener"))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "dexaflow_tls_deny_list_denied_connections"); err != nil || n != 0 {
		t.Fatalf("before CountDenied: %d series, %v", n, err)
	}
	open := 2
	d.CountDenied("agent_grpc", func() int { return open })
	want := func(v string) string {
		return `
# HELP dexaflow_tls_deny_list_denied_connections Open connections whose peer certificate chain the deny list in use denies, counted at the scrape: 0 once the live cut has closed them.
# TYPE dexaflow_tls_deny_list_denied_connections gauge
dexaflow_tls_deny_list_denied_connections{listener="agent_grpc"} ` + v + "\n"
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want("2")), "dexaflow_tls_deny_list_denied_connections"); err != nil {
		t.Fatal(err)
	}
	open = 0
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want("0")), "dexaflow_tls_deny_list_denied_connections"); err != nil {
		t.Fatal(err)
	}
	d.CountDenied("agent_grpc", nil)
	if n, err := testutil.GatherAndCount(reg, "dexaflow_tls_deny_list_denied_connections"); err != nil || n != 0 {
		t.Fatalf("after CountDenied(nil): %d series, %v", n, err)
	}
}
