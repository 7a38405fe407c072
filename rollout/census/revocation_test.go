package census_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/drain"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/httptls"
	"github.com/hotcert/hotcert/metrics"
	"github.com/hotcert/hotcert/revocation"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
	"github.com/hotcert/hotcert/tlsconfig"
)

// denyListServer is a process running the hotcert library as a server of a
// deny list would: an mTLS HTTPS server enforcing the list it reloads from a
// mounted-volume-like directory, exporting the list's version and its open
// denied connections on a metrics endpoint. With cut, the revocation cut
// closes what a new list denies; without, the list applies to new handshakes
// only (as most CRL checkers do), and what was open stays open.
type denyListServer struct {
	dir         *hotcerttest.AtomicWriter
	list        *revocation.Reloader
	addr        string // the HTTPS server
	metricsPort int
}

func startDenyListServer(t *testing.T, serverCA, clientCA *hotcerttest.CA, list string, cut bool) *denyListServer {
	t.Helper()
	s := &denyListServer{dir: hotcerttest.MustNewAtomicWriter(t.TempDir())}
	s.dir.MustWrite(map[string][]byte{"deny.list": []byte(list)})
	src, err := revocation.Files(filepath.Join(s.dir.Dir(), "deny.list"), "")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	dm, err := metrics.NewDenyList(reg)
	if err != nil {
		t.Fatal(err)
	}
	if s.list, err = revocation.New(context.Background(), src, nil, hotcert.WithComponent("api"), hotcert.WithSettle(0), revocation.WithObserver(dm)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.list.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	leaf := serverCA.MustIssue()
	m, err := hotcert.Validate(hotcert.Content{Cert: hotcert.Input{Name: "tls.crt", Data: leaf.ChainPEM}, Key: hotcert.Input{Name: "tls.key", Data: leaf.KeyPEM},
		CA: hotcert.Input{Name: "ca.crt", Data: clientCA.CertPEM}})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{TLSConfig: httptls.MTLSServerConfig(hotcert.NewStore(m), tlsconfig.WithDenyList(s.list)),
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })}
	var opts []drain.Option
	if cut {
		opts = append(opts, drain.WithRevocationCut(s.list))
	}
	d := drain.NewHTTPServer(opts...)
	d.Wrap(srv)
	dm.CountDenied("api", func() int { return d.DeniedConns(s.list.Current()) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = ln.Addr().String()
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { d.Close(); srv.Close() })

	ms := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(ms.Close)
	_, port, _ := net.SplitHostPort(ms.Listener.Addr().String())
	s.metricsPort, _ = strconv.Atoi(port)
	return s
}

// connect opens an HTTP/2 connection to s as client (which stays open, idle,
// until its transport closes it) and returns the transport.
func (s *denyListServer) connect(t *testing.T, serverCA *hotcerttest.CA, client *hotcerttest.Leaf) *http.Transport {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: hotcerttest.Pool(serverCA), Certificates: []tls.Certificate{client.TLSCertificate()}},
		ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("https://" + s.addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("%s, want HTTP/2", resp.Proto)
	}
	return tr
}

func revocationStraggler(tr *v1alpha1.TrustRotation, pod string) *v1alpha1.Straggler {
	if tr.Status.Revocation == nil {
		return nil
	}
	for i, s := range tr.Status.Revocation.Stragglers {
		if s.Pod == pod {
			return &tr.Status.Revocation.Stragglers[i]
		}
	}
	return nil
}

func revocationReason(tr *v1alpha1.TrustRotation) string {
	if c := condition(tr, v1alpha1.ConditionRevocationEnforced); c != nil && c.ObservedGeneration == tr.Generation {
		return string(c.Status) + "/" + c.Reason
	}
	return ""
}

// TestRevocationEnforcedClusterWide: one agent certificate is revoked by
// serial, through a deny-list ConfigMap that two library servers (real TLS
// servers, each reading its own copy of the list as a kubelet volume would
// give it) enforce, and a third consumer of the trust reports nothing. What
// each server enforces and how many connections its list denies are read from
// a real Prometheus scraping them, with one query per census. The census
// finds the ConfigMap without the entry (NotListed); once the list holds it,
// the server with the live cut is proven (refused, its revoked client's
// connection closed), the one without a cut is named with the connection it
// still holds; once that connection ends only the silent consumer is left
// (Unproven), until it is acknowledged: RevocationEnforced is True, with an
// Event. A newer list that still revokes the serial keeps it True while the
// servers still enforce the previous one; a list that drops the entry makes
// it False again, with a Warning Event; without the object nothing can be
// judged (Invalid).
func TestRevocationEnforcedClusterWide(t *testing.T) {
	ns := env.NewNamespace(t)
	ctx := testContext(t)
	agentCA := hotcerttest.MustNewCA(hotcerttest.WithCommonName("agents CA"))
	serverCA := hotcerttest.MustNewCA(hotcerttest.WithCommonName("servers CA"))
	revoked, kept := agentCA.MustIssue(hotcerttest.WithCommonName("lost-laptop")), agentCA.MustIssue(hotcerttest.WithCommonName("agent-2"))
	serial := hotcert.FormatSerial(revoked.Cert.SerialNumber)
	entry := fmt.Sprintf("serial %s issuer %s\n", serial, hotcert.FingerprintOf(agentCA.Cert))
	nothing := "# nothing revoked\n"

	create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ca"}, Data: map[string]string{"ca.crt": string(agentCA.CertPEM)}})
	denyCM := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "revoked"}, Data: map[string]string{"deny.list": nothing}}
	create(t, denyCM)
	// What the kubelet does for a pod mounting the ConfigMap: the same bytes,
	// swapped into its volume.
	writeList := func(list string, servers ...*denyListServer) {
		t.Helper()
		denyCM.Data["deny.list"] = list
		if err := env.Client().Update(ctx, denyCM); err != nil {
			t.Fatal(err)
		}
		for _, s := range servers {
			s.dir.MustWrite(map[string][]byte{"deny.list": []byte(list)})
		}
	}

	withCut := startDenyListServer(t, serverCA, agentCA, nothing, true)
	noCut := startDenyListServer(t, serverCA, agentCA, nothing, false)
	withCut.connect(t, serverCA, revoked)
	withCut.connect(t, serverCA, kept)
	lingering := noCut.connect(t, serverCA, revoked)
	prom := startPrometheus(t, map[string][2]string{
		net.JoinHostPort("127.0.0.1", strconv.Itoa(withCut.metricsPort)): {ns, "api-cut"},
		net.JoinHostPort("127.0.0.1", strconv.Itoa(noCut.metricsPort)):   {ns, "api-nocut"},
	})
	longAgo := time.Now().Add(-time.Hour)
	for _, p := range []string{"api-cut", "api-nocut", "nginx"} {
		createPod(t, ns, consumerPod{name: p, vol: configMapVolume("ca"), started: longAgo})
	}

	name := "rev-" + ns
	agents := v1alpha1.CA{Name: "agents CA", PEM: string(agentCA.CertPEM)}
	createRotation(t, name, v1alpha1.TrustRotationSpec{
		// A standing census of the agents CA's consumers: no rotation under way.
		OldCA: agents, NewCA: agents,
		Trust:    []v1alpha1.TrustObject{{ConfigMap: &v1alpha1.ObjectKey{Namespace: ns, Name: "ca", Key: "ca.crt"}}},
		Evidence: v1alpha1.Evidence{Prometheus: &v1alpha1.PrometheusSource{URL: prom}},
		Revocation: &v1alpha1.RevocationSpec{
			Serials:   []v1alpha1.RevokedSerial{{Serial: strings.ToLower(serial), Issuer: hotcert.FingerprintOf(agentCA.Cert).Colon()}},
			DenyLists: []v1alpha1.DenyListObject{{ConfigMap: &v1alpha1.DenyListKeys{Namespace: ns, Name: "revoked"}}},
		},
	})
	reg := startCensus(t)

	// The deny list does not hold the serial yet.
	tr := waitRotation(t, name, "NotListed", func(tr *v1alpha1.TrustRotation) bool {
		return revocationReason(tr) == "False/"+v1alpha1.ReasonNotListed && tr.Status.Revocation.Consumers.Total == 3
	})
	rs := tr.Status.Revocation
	if len(rs.DenyLists) != 1 || rs.DenyLists[0].RevokesAll || rs.DenyLists[0].Version != withCut.list.Current().Version() ||
		len(rs.Entries) != 1 || rs.Entries[0].Listed || rs.Entries[0].Entry != strings.TrimSpace(entry) {
		t.Fatalf("before the revocation: %+v", rs)
	}

	// The list revokes the serial: the server with the cut closes the revoked
	// client's connection; the one without keeps it.
	writeList(entry, withCut, noCut)
	tr = waitRotation(t, name, "the server without a cut named with its connection", func(tr *v1alpha1.TrustRotation) bool {
		s := revocationStraggler(tr, "api-nocut")
		return revocationReason(tr) == "False/"+v1alpha1.ReasonInProgress && s != nil && s.Evidence == v1alpha1.EvidenceReported &&
			strings.Contains(s.Reason, "but 1 open connections its list denies are left") && revocationStraggler(tr, "api-cut") == nil
	})
	want := v1alpha1.RevocationCounts{Pods: 3, Total: 3, ByEvidence: v1alpha1.RevocationEvidenceCounts{Reported: 2, Unknown: 1},
		ByState: v1alpha1.RevocationStateCounts{Refused: 1, ConnectionsLeft: 1}, DeniedConnections: 1}
	if got := tr.Status.Revocation.Consumers; got != want {
		t.Fatalf("counts %+v, want %+v", got, want)
	}
	if s := revocationStraggler(tr, "nginx"); s == nil || s.Evidence != v1alpha1.EvidenceUnknown || s.How != "volume" ||
		!strings.Contains(s.Reason, "reports no deny list") {
		t.Fatalf("the silent consumer: %+v", s)
	}
	v1 := withCut.list.Current().Version()
	if vs := tr.Status.Revocation.Versions; len(vs) != 1 || vs[0] != v1 {
		t.Fatalf("versions %v, want [%s]", vs, v1)
	}

	// The lingering connection ends: only the silent consumer is left.
	lingering.CloseIdleConnections()
	waitRotation(t, name, "Unproven", func(tr *v1alpha1.TrustRotation) bool {
		return revocationReason(tr) == "False/"+v1alpha1.ReasonUnproven && tr.Status.Revocation.Consumers.ByState.Refused == 2
	})

	// A person vouches for it.
	tr = rotation(t, name)
	tr.Spec.Acknowledged = []v1alpha1.Acknowledgement{{Namespace: ns, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "nginx"}},
		Reason: "nginx -s reload after the CRL was written"}}
	if err := env.Client().Update(ctx, tr); err != nil {
		t.Fatal(err)
	}
	tr = waitRotation(t, name, "RevocationEnforced", func(tr *v1alpha1.TrustRotation) bool {
		return revocationReason(tr) == "True/"+v1alpha1.ReasonDone
	})
	if c := condition(tr, v1alpha1.ConditionRevocationEnforced); c.Message != "refused by all 3 consumers (2 reported, 1 acknowledged) and no connection their lists deny is left" {
		t.Fatalf("condition %+v", c)
	}
	waitEvents(t, name, "RevocationEnforced", 1)
	if v := gaugeValue(t, reg, "hotcert_census_revocation_enforced", name); v != 1 {
		t.Errorf("hotcert_census_revocation_enforced = %v", v)
	}

	// A newer list that still revokes it, not yet delivered to the servers:
	// they enforce a version the census saw revoke the serial.
	writeList(entry + "# reviewed 2026-12-02\n")
	tr = waitRotation(t, name, "the newer version seen", func(tr *v1alpha1.TrustRotation) bool {
		return len(tr.Status.Revocation.Versions) == 2
	})
	if revocationReason(tr) != "True/"+v1alpha1.ReasonDone || tr.Status.Revocation.Versions[1] != v1 {
		t.Fatalf("with the servers one version behind: %s %+v", revocationReason(tr), tr.Status.Revocation)
	}

	// A list that drops the entry.
	writeList(nothing)
	waitRotation(t, name, "NotListed again", func(tr *v1alpha1.TrustRotation) bool {
		return revocationReason(tr) == "False/"+v1alpha1.ReasonNotListed
	})
	waitEvents(t, name, "RevocationNotEnforced", 1)

	// The deny-list object is gone: nothing can be judged.
	if err := env.Client().Delete(ctx, denyCM); err != nil {
		t.Fatal(err)
	}
	tr = waitRotation(t, name, "Invalid", func(tr *v1alpha1.TrustRotation) bool {
		return revocationReason(tr) == "False/"+v1alpha1.ReasonInvalid
	})
	if e := tr.Status.Revocation.DenyLists[0].Error; !strings.Contains(e, "revoked") {
		t.Fatalf("the missing object's error: %q", e)
	}
}

// gaugeValue is the value of the census's gauge name{rotation} (of the
// gauge name without labels for rotation "").
func gaugeValue(t *testing.T, reg *prometheus.Registry, name, rotation string) float64 {
	t.Helper()
	v, ok := metricValue(t, reg, name, rotation)
	if !ok {
		t.Fatalf("no %s{rotation=%q}", name, rotation)
	}
	return v
}

// metricValue is the value of the gauge or counter name{rotation} (of the
// series without labels for rotation ""), and whether there is one.
func metricValue(t *testing.T, reg *prometheus.Registry, name, rotation string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			// One of the two is nil, and its value 0.
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			if rotation == "" && len(m.GetLabel()) == 0 {
				return v, true
			}
			for _, l := range m.GetLabel() {
				if l.GetName() == "rotation" && l.GetValue() == rotation {
					return v, true
				}
			}
		}
	}
	return 0, false
}
