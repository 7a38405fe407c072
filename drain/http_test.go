package drain_test

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/drain"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/httptls"
	"github.com/hotcert/hotcert/internal/testutil"
)

// httpFixture is a TLS net/http server whose material follows a Store, with drain
// policies attached.
type httpFixture struct {
	store  *hotcert.Store
	url    string
	logs   *testutil.LogBuffer
	conns  atomic.Int64 // connections accepted
	closed atomic.Int64 // connections closed
}

func newHTTPFixture(t *testing.T, m *hotcert.Material, mtls bool, policies func(*hotcert.Store) []drain.Option) *httpFixture {
	t.Helper()
	f := &httpFixture{store: hotcert.NewStore(m), logs: &testutil.LogBuffer{}}
	cfg := httptls.ServerConfig(f.store)
	if mtls {
		cfg = httptls.MTLSServerConfig(f.store)
	}
	srv := &http.Server{
		TLSConfig: cfg,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if d, err := time.ParseDuration(r.URL.Query().Get("sleep")); err == nil {
				time.Sleep(d)
			}
			io.WriteString(w, "ok")
		}),
		ConnState: func(_ net.Conn, st http.ConnState) {
			switch st {
			case http.StateNew:
				f.conns.Add(1)
			case http.StateClosed:
				f.closed.Add(1)
			}
		},
	}
	opts := append([]drain.Option{drain.WithLogger(slog.New(slog.NewTextHandler(f.logs, nil))), drain.WithComponent("api")}, policies(f.store)...)
	d := drain.NewHTTPServer(opts...)
	d.Wrap(srv)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.url = "https://" + ln.Addr().String() + "/"
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { d.Close(); srv.Close() })
	return f
}

// client returns an HTTP client trusting ca, speaking HTTP/2 or HTTP/1.1 only.
func httpClient(t *testing.T, h2 bool, ca *hotcerttest.CA, cert *hotcerttest.Leaf) *http.Client {
	t.Helper()
	cfg := &tls.Config{RootCAs: hotcerttest.Pool(ca)}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{cert.TLSCertificate()}
	}
	tr := &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: h2}
	if !h2 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{} // HTTP/1.1 only
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// get returns the serial of the server certificate of the connection that served it
// and whether the connection was reused.
func get(t *testing.T, c *http.Client, url string) (serial string, reused bool, err error) {
	cs, reused, err := getTLS(c, url)
	if err != nil {
		return "", false, err
	}
	return cs.PeerCertificates[0].SerialNumber.String(), reused, nil
}

// getTLS returns the TLS state of the connection that served a GET of url and
// whether the connection was reused.
func getTLS(c *http.Client, url string) (_ *tls.ConnectionState, reused bool, _ error) {
	var info httptrace.GotConnInfo
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req = req.WithContext(httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { info = i }}))
	resp, err := c.Do(req)
	if err != nil {
		return nil, false, err
	}
	defer resp.Body.Close()
	if _, err := io.ReadAll(resp.Body); err != nil {
		return nil, false, err
	}
	return resp.TLS, info.Reused, nil
}

func TestHTTPIdentityDrainMovesClientsOntoTheNewCertificate(t *testing.T) {
	for _, h2 := range []bool{true, false} {
		name := "HTTP/1.1"
		if h2 {
			name = "HTTP/2"
		}
		t.Run(name, func(t *testing.T) {
			ca := hotcerttest.MustNewCA()
			first, second := ca.MustIssue(), ca.MustIssue()
			f := newHTTPFixture(t, material(t, first, ca), false, func(s *hotcert.Store) []drain.Option {
				return []drain.Option{drain.WithIdentityDrain(s, 200*time.Millisecond), drain.WithGrace(5 * time.Second)}
			})
			c := httpClient(t, h2, ca, nil)
			if s, _, err := get(t, c, f.url); err != nil || s != first.Cert.SerialNumber.String() {
				t.Fatalf("first request: %s %v", s, err)
			}
			f.store.Set(material(t, second, ca))
			testutil.WaitFor(t, "requests served with the new certificate", func() bool {
				s, _, err := get(t, c, f.url+"?sleep=5ms")
				if err != nil {
					t.Fatalf("a request failed during the drain: %v", err)
				}
				return s == second.Cert.SerialNumber.String()
			})
			if f.conns.Load() != 2 {
				t.Errorf("%d connections for one drain, want 2 (the old one and its replacement)", f.conns.Load())
			}
		})
	}
}

func TestHTTPTrustCutClosesOnlyUntrustedClients(t *testing.T) {
	serverCA, caA, caB := hotcerttest.MustNewCA(), hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	leaf := serverCA.MustIssue()
	f := newHTTPFixture(t, material(t, leaf, caA, caB), true, func(s *hotcert.Store) []drain.Option {
		return []drain.Option{drain.WithTrustCut(s), drain.WithGrace(5 * time.Second)}
	})
	keep := httpClient(t, true, serverCA, caB.MustIssue(hotcerttest.WithCommonName("client-b")))
	cut := httpClient(t, true, serverCA, caA.MustIssue(hotcerttest.WithCommonName("client-a")))
	for _, c := range []*http.Client{keep, cut} {
		if _, _, err := get(t, c, f.url); err != nil {
			t.Fatal(err)
		}
	}
	// A request in flight on the connection about to be cut finishes.
	inflight := make(chan error, 1)
	go func() { _, _, err := get(t, cut, f.url+"?sleep=400ms"); inflight <- err }()
	time.Sleep(100 * time.Millisecond)

	f.store.Set(material(t, leaf, caB)) // caA removed from the client-CA bundle
	if err := <-inflight; err != nil {
		t.Fatalf("the in-flight request on the cut connection failed: %v", err)
	}
	testutil.WaitFor(t, "the cut to be logged", func() bool { return strings.Contains(f.logs.String(), "peer certificate no longer trusted") })
	if !strings.Contains(f.logs.String(), "CN=client-a") || strings.Contains(f.logs.String(), "CN=client-b") {
		t.Fatalf("wrong peer cut:\n%s", f.logs)
	}
	testutil.WaitFor(t, "the untrusted client's connection to be closed", func() bool { return f.closed.Load() == 1 })
	if _, _, err := get(t, cut, f.url); err == nil {
		t.Fatal("the client whose CA was removed still gets in")
	}
	if _, reused, err := get(t, keep, f.url); err != nil || !reused {
		t.Fatalf("the trusted client lost its connection: reused=%v err=%v", reused, err)
	}
}
