package evidence

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/metrics"
)

var (
	ca2025 = hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2025"))
	ca2026 = hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2026"))
)

func fingerprint(c *x509.Certificate) string { return hotcert.FingerprintOf(c).String() }

// TestScrapeReadsWhatTheLibraryExports: a real hotcert metrics Recorder,
// served by promhttp, scraped: the report holds the CAs of the bundle and the
// leaf, and a swap to a bundle without the old CA shows at the next scrape.
func TestScrapeReadsWhatTheLibraryExports(t *testing.T) {
	reg := prometheus.NewRegistry()
	rec, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	leaf := ca2026.MustIssue()
	load := func(bundle []byte) {
		m, err := hotcert.Validate(hotcert.Content{Cert: hotcert.Input{Name: "tls.crt", Data: leaf.ChainPEM}, Key: hotcert.Input{Name: "tls.key", Data: leaf.KeyPEM},
			CA: hotcert.Input{Name: "ca.crt", Data: bundle}})
		if err != nil {
			t.Fatal(err)
		}
		rec.ObserveLoad("agent_grpc", m, false)
	}
	load(hotcerttest.BundlePEM(ca2025, ca2026))
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	ctx := context.Background()

	r, ok, err := Scrape(ctx, srv.Client(), srv.URL, "", "app")
	if err != nil || !ok {
		t.Fatalf("scrape: ok %v, %v", ok, err)
	}
	if r.Container != "app" || len(r.CAs) != 2 || !r.CAs[fingerprint(ca2025.Cert)] || !r.CAs[fingerprint(ca2026.Cert)] {
		t.Fatalf("report %+v", r)
	}
	if len(r.Leaves) != 1 || r.Leaves[0].SHA256 != fingerprint(leaf.Cert) || r.Leaves[0].Issuer != ca2026.Cert.Subject.String() {
		t.Fatalf("leaves %+v", r.Leaves)
	}
	load(ca2026.CertPEM)
	if r, _, _ = Scrape(ctx, srv.Client(), srv.URL, "", "app"); len(r.CAs) != 1 || r.CAs[fingerprint(ca2025.Cert)] {
		t.Fatalf("after the swap: %+v", r)
	}

	// Another prefix finds nothing; a process without hotcert reports nothing.
	if _, ok, err := Scrape(ctx, srv.Client(), srv.URL, "dexaflow", ""); ok || err != nil {
		t.Fatalf("prefix dexaflow: ok %v, %v", ok, err)
	}
	plain := httptest.NewServer(promhttp.HandlerFor(prometheus.NewRegistry(), promhttp.HandlerOpts{}))
	defer plain.Close()
	if _, ok, err := Scrape(ctx, plain.Client(), plain.URL, "", ""); ok || err != nil {
		t.Fatalf("no hotcert: ok %v, %v", ok, err)
	}
	notFound := httptest.NewServer(http.NotFoundHandler())
	defer notFound.Close()
	if _, _, err := Scrape(ctx, notFound.Client(), notFound.URL, "", ""); err == nil || !strings.Contains(err.Error(), "HTTP 404") {
		t.Fatalf("404: %v", err)
	}
}

// TestPrometheusGroupsByPod: one query, the series grouped by the labels that
// name a pod and its container; series of targets that are not pods are
// left out; an API error is an error.
func TestPrometheusGroupsByPod(t *testing.T) {
	var queries []string
	result := []map[string]string{
		{"__name__": "hotcert_tls_ca_certificate_info", "namespace": "a", "pod": "p", "sha256": "N1", "subject": "CN=CA-2026"},
		{"__name__": "hotcert_tls_ca_certificate_info", "namespace": "a", "pod": "p", "sha256": "o1"},
		{"__name__": "hotcert_tls_cert_info", "namespace": "a", "pod": "p", "container": "srv", "sha256": "l1", "issuer": "CN=CA-2026"},
		{"__name__": "hotcert_tls_ca_certificate_info", "namespace": "a", "pod": "q", "container": "app", "sha256": "n1"},
		{"__name__": "hotcert_tls_ca_certificate_info", "job": "node", "sha256": "n1"},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		queries = append(queries, r.URL.Path+"?"+r.FormValue("query"))
		var res []map[string]any
		for _, m := range result {
			res = append(res, map[string]any{"metric": m, "value": []any{1.7e9, "1"}})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": map[string]any{"resultType": "vector", "result": res}})
	}))
	defer srv.Close()
	p := Prometheus{URL: srv.URL + "/prom", Client: srv.Client()}
	reps, err := p.Reports(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(queries) != 1 || queries[0] != `/prom/api/v1/query?{__name__=~"hotcert_tls_cert_info|hotcert_tls_ca_certificate_info"}` {
		t.Fatalf("queries %q", queries)
	}
	if len(reps) != 2 || len(reps["a/p"]) != 2 || len(reps["a/q"]) != 1 {
		t.Fatalf("reports %+v", reps)
	}
	anon, srvRep := reps["a/p"][0], reps["a/p"][1]
	if anon.Container != "" || !anon.CAs["n1"] || !anon.CAs["o1"] || srvRep.Container != "srv" || len(srvRep.Leaves) != 1 || srvRep.Leaves[0].Issuer != "CN=CA-2026" {
		t.Fatalf("pod a/p: %+v", reps["a/p"])
	}

	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"status":"error","errorType":"bad_data","error":"parse error"}`))
	}))
	defer bad.Close()
	if _, err := (Prometheus{URL: bad.URL}).Reports(context.Background()); err == nil || !strings.Contains(err.Error(), "bad_data: parse error") {
		t.Fatalf("error response: %v", err)
	}
}

// serve runs a TLS server on loopback serving leaf; it returns its address.
func serve(t *testing.T, leaf *hotcerttest.Leaf) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{leaf.TLSCertificate()}, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _ = c.(*tls.Conn).Handshake(); _ = c.Close() }()
		}
	}()
	return ln.Addr().String()
}

// TestHandshakeTellsWhichCAIssuedTheLeaf: real handshakes on loopback.
func TestHandshakeTellsWhichCAIssuedTheLeaf(t *testing.T) {
	h := Handshaker{Old: []*x509.Certificate{ca2025.Cert}, New: []*x509.Certificate{ca2026.Cert}, ServerName: "cp.example", Timeout: 10 * time.Second}
	ctx := context.Background()
	inter := ca2026.MustNewIntermediate(hotcerttest.WithCommonName("CA-2026 issuing"))
	for name, c := range map[string]struct {
		leaf          *hotcerttest.Leaf
		old, new, dns bool
	}{
		"old":          {ca2025.MustIssue(hotcerttest.WithDNSNames("cp.example")), true, false, true},
		"new":          {ca2026.MustIssue(hotcerttest.WithDNSNames("cp.example")), false, true, true},
		"intermediate": {inter.MustIssue(hotcerttest.WithDNSNames("cp.example")), false, true, true},
		"wrong-name":   {ca2026.MustIssue(hotcerttest.WithDNSNames("other.example")), false, true, false},
		"neither":      {hotcerttest.MustNewCA().MustIssue(hotcerttest.WithDNSNames("cp.example")), false, false, true},
	} {
		s := h.Served(ctx, serve(t, c.leaf))
		if s.Err != "" || s.IssuedByOld != c.old || s.IssuedByNew != c.new || s.HostnameOK != c.dns || s.Serial != hotcert.FormatSerial(c.leaf.Cert.SerialNumber) {
			t.Errorf("%s: %+v", name, s)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	if s := h.Served(ctx, addr); !strings.HasPrefix(s.Err, "cannot connect: ") {
		t.Errorf("closed port: %+v", s)
	}
}
