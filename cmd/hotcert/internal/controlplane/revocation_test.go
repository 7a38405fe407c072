package controlplane_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/agentrpc"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/controlplane"
	"github.com/hotcert/hotcert/grpccreds"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/revocation"
	"github.com/hotcert/hotcert/tlsconfig"
)

// revocationFleet is how many agents TestRevokeOneAgentOfMany connects: each with
// a certificate of its own, a real mTLS handshake and a gRPC stream. Under -race on
// the shared two-core machine 1,000 take 15 s (8 s of it connecting, 1.8 GB
// resident); 250 take 6.5 s (0.5 GB). BenchmarkRevocationCut (make bench) runs
// 1,000 to 10,000 in a child process without -race and times the cut.
const revocationFleet = 1000

// denyVolume is the replica's deny-list volume: deny.list and ca.crl, swapped as
// the kubelet swaps a mounted ConfigMap.
type denyVolume struct{ *hotcerttest.AtomicWriter }

func (v denyVolume) write(t *testing.T, list string, crl []byte) {
	t.Helper()
	files := map[string][]byte{"deny.list": []byte(list)}
	if crl != nil {
		files["ca.crl"] = crl
	}
	if _, err := v.Write(files); err != nil {
		t.Fatal(err)
	}
}

type fleetAgent struct {
	leaf  *hotcerttest.Leaf
	creds credentials.TransportCredentials
	cc    *grpc.ClientConn
	st    grpc.ClientStream
	msgs  chan agentrpc.Message // what the server sent on the stream, read by one goroutine
	ended atomic.Bool           // its stream ended
}

// heartbeat sends heartbeat seq and waits for its acknowledgement.
func (a *fleetAgent) heartbeat(seq uint64) error {
	if err := agentrpc.Send(a.st, agentrpc.Message{Type: agentrpc.TypeHeartbeat, Seq: seq}); err != nil {
		return err
	}
	timeout := time.After(10 * time.Second)
	for {
		select {
		case m, ok := <-a.msgs:
			if !ok {
				return fmt.Errorf("stream ended")
			}
			if m.Type == agentrpc.TypeHeartbeatAck && m.Seq == seq {
				return nil
			}
		case <-timeout:
			return fmt.Errorf("no acknowledgement of heartbeat %d", seq)
		}
	}
}

// TestRevokeOneAgentOfMany connects revocationFleet agents to a replica and
// revokes three of them in turn — by serial, by SPKI, by CRL — through its
// deny-list volume: each one's stream ends, its reconnect is refused, no other
// agent reconnects or fails a heartbeat, and /healthz proves it (the version
// enforced, no denied connection left, the serial refused with no connection). A
// forged CRL, a stale CRL and a garbage list are then each refused with the last
// good list kept.
func TestRevokeOneAgentOfMany(t *testing.T) {
	now := time.Now()
	serverCA, agentCA := hotcerttest.MustNewCA(), hotcerttest.MustNewCA(hotcerttest.WithCommonName("agents CA"))
	cas := newCAVolume(t, agentCA)
	deny := denyVolume{hotcerttest.MustNewAtomicWriter(filepath.Join(t.TempDir(), "deny"))}
	deny.write(t, "# nothing revoked\n", agentCA.MustCRL(1, now.Add(-time.Hour), now.Add(time.Hour)))
	r := startReplica(t, "cp-0", serverCA.MustIssue(), withClientCA(t, cas), func(c *controlplane.Config) {
		src, err := revocation.Files(filepath.Join(deny.Dir(), "deny.list"), filepath.Join(deny.Dir(), "ca.crl"))
		if err != nil {
			t.Fatal(err)
		}
		c.DenyList = src
	})
	trust, err := hotcert.Validate(hotcert.Content{CA: hotcert.Input{Name: "ca", Data: hotcerttest.BundlePEM(serverCA)}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := raiseNoFile(2*revocationFleet + 512); err != nil { // both ends of each stream
		t.Fatal(err)
	}
	agents := make([]*fleetAgent, revocationFleet)
	for i := range agents {
		leaf := agentCA.MustIssue(hotcerttest.WithCommonName(scaleAgentID(i)))
		m, err := hotcert.Validate(hotcert.Content{Cert: hotcert.Input{Name: "c", Data: leaf.ChainPEM}, Key: hotcert.Input{Name: "k", Data: leaf.KeyPEM}})
		if err != nil {
			t.Fatal(err)
		}
		agents[i] = &fleetAgent{leaf: leaf, creds: grpccredsClient(m, trust)}
	}
	start := time.Now()
	if err := forEachAgent(agents, func(a *fleetAgent, i int) error {
		var err error
		a.cc, a.st, err = scaleAgent(ctx, r.addr, a.creds, scaleAgentID(i), "")
		if err == nil {
			a.msgs = make(chan agentrpc.Message, 4)
			go func() {
				defer close(a.msgs)
				for {
					m, err := agentrpc.Recv(a.st)
					if err != nil {
						a.ended.Store(true)
						return
					}
					select {
					case a.msgs <- m:
					default: // work pushed to it: not what the test reads
					}
				}
			}()
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, a := range agents {
			if a.cc != nil {
				a.cc.Close()
			}
		}
	}()
	t.Logf("%d agents connected in %s", len(agents), time.Since(start).Round(time.Millisecond))
	handshakes := r.srv.Stats().Handshakes

	spki := func(l *hotcerttest.Leaf) string {
		h := sha256.Sum256(l.Cert.RawSubjectPublicKeyInfo)
		return hex.EncodeToString(h[:])
	}
	bySerial, bySPKI, byCRL := agents[11], agents[222], agents[revocationFleet-1]
	list := fmt.Sprintf("serial %s issuer %s\n", hotcert.FormatSerial(bySerial.leaf.Cert.SerialNumber), hotcert.FingerprintOf(agentCA.Cert))
	crl := agentCA.MustCRL(1, now.Add(-time.Hour), now.Add(time.Hour))
	steps := []struct {
		name    string
		revoked *fleetAgent
		list    string
		crl     func() []byte
	}{
		{"serial", bySerial, list, func() []byte { return crl }},
		{"spki", bySPKI, list + "spki " + spki(bySPKI.leaf) + "\n", func() []byte { return crl }},
		{"crl", byCRL, list + "spki " + spki(bySPKI.leaf) + "\n", func() []byte {
			crl = agentCA.MustCRL(2, now.Add(-time.Hour), now.Add(time.Hour), byCRL.leaf.Cert.SerialNumber)
			return crl
		}},
	}
	var gone []*fleetAgent
	for seq, step := range steps {
		deny.write(t, step.list, step.crl())
		testutil.WaitFor(t, step.name+": the revoked agent's stream to end", step.revoked.ended.Load)
		gone = append(gone, step.revoked)

		// Its reconnect is refused at the handshake.
		octx, ocancel := context.WithTimeout(ctx, 10*time.Second)
		if _, _, err := scaleAgent(octx, r.addr, step.revoked.creds, "again", ""); err == nil {
			t.Errorf("%s: the revoked agent reconnected", step.name)
		}
		ocancel()
		// Every other agent still holds its stream: a heartbeat round, no reconnect.
		var failed atomic.Int64
		_ = forEachAgent(agents, func(a *fleetAgent, _ int) error {
			if contains(gone, a) {
				return nil
			}
			if err := a.heartbeat(uint64(seq + 2)); err != nil || a.ended.Load() {
				failed.Add(1)
			}
			return nil
		})
		if failed.Load() != 0 {
			t.Errorf("%s: %d other agents lost their stream", step.name, failed.Load())
		}
		if got := r.srv.Stats().Handshakes; got != handshakes {
			t.Errorf("%s: %d handshakes succeeded since the fleet connected, want 0", step.name, got-handshakes)
		}

		st := healthz(t, r.srv, hotcert.FormatSerial(step.revoked.leaf.Cert.SerialNumber))
		dl := st.DenyList
		if dl == nil || dl.Version != r.srv.DenyList().Current().Version() || dl.DeniedConnections != 0 ||
			dl.Connections != revocationFleet-len(gone) || dl.Serial == nil || !dl.Serial.Revoked && step.name != "spki" || dl.Serial.Connections != 0 {
			t.Errorf("%s: /healthz deny_list = %+v (serial %+v)", step.name, dl, dl.Serial)
		}
		// The metric the census reads says what /healthz says.
		if n, err := promtestutil.GatherAndCount(r.reg, "hotcert_tls_deny_list_denied_connections"); err != nil || n != 1 {
			t.Errorf("%s: %d hotcert_tls_deny_list_denied_connections series (%v), want 1", step.name, n, err)
		}
		if v := metricValue(t, r.reg, "hotcert_tls_deny_list_denied_connections", map[string]string{"component": "agent_grpc_deny_list"}); dl == nil || v != float64(dl.DeniedConnections) {
			t.Errorf("%s: hotcert_tls_deny_list_denied_connections = %v, /healthz denied_connections %+v", step.name, v, dl)
		}
	}
	if n := r.logs.Count("closing connection: peer certificate revoked"); n != 3 {
		t.Errorf("%d cut lines, want 3", n)
	}

	// Bad lists: each refused once, the last good list kept.
	good := r.srv.DenyList().Current()
	forger := hotcerttest.MustNewCA(hotcerttest.WithCommonName("agents CA"))
	for i, bad := range []struct {
		list string
		crl  []byte
	}{
		{list, forger.MustCRL(3, now.Add(-time.Hour), now.Add(time.Hour), agents[5].leaf.Cert.SerialNumber)},
		{list, agentCA.MustCRL(4, now.Add(-3*time.Hour), now.Add(-2*time.Hour))},
		{"revoke everything\n", crl},
	} {
		deny.write(t, bad.list, bad.crl)
		testutil.WaitFor(t, "the refusal", func() bool { return r.srv.DenyList().Status().Failures == uint64(i+1) })
		if r.srv.DenyList().Current() != good {
			t.Fatalf("bad list %d replaced the last good one", i)
		}
	}
	if st := healthz(t, r.srv, ""); st.DenyList.ReloadFailures != 3 || st.DenyList.LastError == "" || st.DenyList.Version != good.Version() {
		t.Errorf("/healthz after bad lists: %+v", st.DenyList)
	}
	if v := metricValue(t, r.reg, "hotcert_tls_deny_list_info", map[string]string{"component": "agent_grpc_deny_list", "version": good.Version()}); v != 1 {
		t.Errorf("hotcert_tls_deny_list_info{version=%s} = %v", good.Version(), v)
	}
	if v := metricValue(t, r.reg, "hotcert_tls_deny_list_reload_failures_total", map[string]string{"component": "agent_grpc_deny_list"}); v != 3 {
		t.Errorf("hotcert_tls_deny_list_reload_failures_total = %v, want 3", v)
	}
}

func grpccredsClient(id, trust *hotcert.Material) credentials.TransportCredentials {
	return grpccreds.NewClient(hotcert.NewStore(id), tlsconfig.WithTrust(hotcert.NewStore(trust)), tlsconfig.WithServerName("localhost"))
}

func contains(as []*fleetAgent, a *fleetAgent) bool {
	for _, x := range as {
		if x == a {
			return true
		}
	}
	return false
}

// forEachAgent runs f for every agent, 64 at a time, and returns the first error.
func forEachAgent(agents []*fleetAgent, f func(*fleetAgent, int) error) error {
	sem := make(chan struct{}, 64)
	var first firstError
	done := make(chan struct{}, len(agents))
	for i, a := range agents {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; done <- struct{}{} }()
			first.set(f(a, i))
		}()
	}
	for range agents {
		<-done
	}
	return first.get()
}

// healthz reads the replica's /healthz, asking about serial when not "".
func healthz(t *testing.T, srv *controlplane.Server, serial string) controlplane.Status {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/healthz?revoked_serial="+serial, nil)
	rec := httptest.NewRecorder()
	srv.HealthHandler().ServeHTTP(rec, req)
	var st controlplane.Status
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
		t.Fatalf("/healthz: %v: %s", err, rec.Body)
	}
	return st
}
