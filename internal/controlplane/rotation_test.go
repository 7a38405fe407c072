package controlplane_test

import (
	"strings"
	"testing"

	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/inspect"
	"github.com/hotcert/hotcert/internal/testutil"
)

const nAgents = 10

// Renewing the server certificate under the same CA: established streams stay up on
// the certificate they were opened with, new connections get the new serial.
func TestRenewServerCertificateDropsNoStream(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	old := ca.MustIssue()
	replicas := []*replica{startReplica(t, "cp-0", old), startReplica(t, "cp-1", old)}
	vol := newCAVolume(t, ca)
	agents := startAgents(t, nAgents, replicas, vol)
	requireServerCert(t, agents, old)

	renewed := ca.MustIssue()
	for _, r := range replicas {
		r.serve(t, renewed)
	}
	// New connections get the new serial, by IP (no SNI) and by name (SNI).
	for _, r := range replicas {
		rep := remote(t, r, vol.path())
		if rep.Certificate.Serial != inspect.SerialHex(renewed.Cert.SerialNumber) || !rep.Bundle.Verified {
			t.Fatalf("%s serves serial %s (verified %v), want %s", r.name, rep.Certificate.Serial, rep.Bundle.Verified, inspect.SerialHex(renewed.Cert.SerialNumber))
		}
	}
	late := startAgents(t, 2, replicas, vol)
	requireServerCert(t, late, renewed)

	// Established streams: still up, still on the old certificate, still heartbeating.
	acks := make([]uint64, len(agents))
	for i, a := range agents {
		acks[i] = a.Stats().HeartbeatsAcked
	}
	testutil.WaitFor(t, "heartbeats on the old streams", func() bool {
		for i, a := range agents {
			if a.Stats().HeartbeatsAcked < acks[i]+3 {
				return false
			}
		}
		return true
	})
	if s := sum(agents); s.drops != 0 || s.connects != nAgents {
		t.Fatalf("renewal: %d stream drops and %d connects, want 0 and %d", s.drops, s.connects, nAgents)
	}
	requireServerCert(t, agents, old)
	requireNoFailures(t, "renewal", replicas, append(agents, late...))
	for _, r := range replicas {
		if n := r.logs.Count("TLS certificate reloaded"); n != 1 {
			t.Errorf("%s logged %d reloads, want 1:\n%s", r.name, n, r.logs)
		}
		if !strings.Contains(r.logs.String(), "serial="+renewed.Cert.SerialNumber.Text(16)) {
			t.Errorf("%s: reload line does not name the new serial:\n%s", r.name, r.logs)
		}
	}

	// A reconnect moves every agent onto the renewed certificate, without a failure.
	reconnectAll(t, replicas, agents)
	requireServerCert(t, agents, renewed)
	requireNoFailures(t, "reconnect after renewal", replicas, agents)
}
