package controlplane_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotcert/hotcert/cmd/hotcert/internal/agentrpc"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/controlplane"
	"github.com/hotcert/hotcert/hotcerttest"
)

// The per-reason failure counters the runbook's alerts use (increase(...) > 0)
// exist at zero for every known reason before the first failure: otherwise the
// series appears at its first increment and the alert misses the first burst.
func TestReasonCountersStartAtZero(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	ks := newKeySet(t, newKeyDir(t, newSigningKey(t)).Dir())
	r := startReplica(t, "cp-0", ca.MustIssue(), withTokens(ks))
	agents := startAgents(t, 1, []*replica{r}, newCAVolume(t, ca), bootstrap(t, ks))
	requireNoFailures(t, "start", []*replica{r}, agents)

	requireZeros(t, r.reg, "hotcert_controlplane_tls_handshake_failures_total", agentrpc.HandshakeReasons())
	requireZeros(t, r.reg, "hotcert_controlplane_token_rejections_total", controlplane.TokenRejectionReasons())
	requireZeros(t, agents[0].reg, "hotcert_agent_tls_handshake_failures_total", agentrpc.HandshakeReasons())
	requireZeros(t, agents[0].reg, "hotcert_agent_connect_failures_total", agentrpc.ConnectReasons())
}

// requireZeros fails unless name has a series with value 0 for each reason.
func requireZeros(t *testing.T, g prometheus.Gatherer, name string, reasons []string) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "reason" {
					got[lp.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	for _, reason := range reasons {
		v, ok := got[reason]
		if !ok || v != 0 {
			t.Errorf("%s{reason=%q}: present %v, value %v; want exported at 0 before any failure", name, reason, ok, v)
		}
	}
}
