package metrics_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotcert/hotcert/drain"
	"github.com/hotcert/hotcert/metrics"
)

// TestDrainedHelpNamesEveryReason checks that the Help of
// hotcert_tls_connections_drained_total names every reason a drain.Observer is
// called with: a reader of /metrics learns the label values from it.
func TestDrainedHelpNamesEveryReason(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	d, err := metrics.NewDrain(reg)
	if err != nil {
		t.Fatal(err)
	}
	d.ObserveDrained("c", "identity") // a counter vector is gathered once it has a child
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	help := ""
	for _, mf := range mfs {
		if mf.GetName() == "hotcert_tls_connections_drained_total" {
			help = mf.GetHelp()
		}
	}
	if help == "" {
		t.Fatal("hotcert_tls_connections_drained_total not gathered")
	}
	for _, reason := range []string{"identity", "trust", "revoked", drain.ReasonPeerCertExpiring, drain.ReasonOwnCertExpiring} {
		if !strings.Contains(help, reason) {
			t.Errorf("help %q does not name reason %q", help, reason)
		}
	}
}
