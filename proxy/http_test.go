package proxy_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/proxy"
)

// httpBackend serves h on a plaintext loopback port (HTTP/1.1 and h2c).
func httpBackend(t testing.TB, h http.Handler) proxy.Target {
	t.Helper()
	ln := listen(t)
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: h, Protocols: &p}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return proxy.Target{Network: "tcp", Address: ln.Addr().String()}
}

func httpsClient(cfg *tls.Config, h2 bool) *http.Client {
	tr := &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: h2, MaxIdleConnsPerHost: 64}
	if !h2 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	return &http.Client{Transport: tr}
}

// The backend sees the verified client identity in the peer header, and never a
// header of that name the client sent itself; without the option, a client's
// X-Forwarded-Client-Cert is removed all the same.
func TestServerHTTPPeerHeaderIsTheProxys(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	id := hotcert.NewStore(material(t, ca.MustIssue()))
	trust := hotcert.NewStore(material(t, nil, ca))
	seen := make(chan http.Header, 2)
	backend := httpBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen <- r.Header.Clone() }))
	leaf := ca.MustIssue(hotcerttest.WithCommonName("web"), hotcerttest.WithURIs("spiffe://example.org/web"), hotcerttest.WithDNSNames("web.example"))
	for _, withHeader := range []bool{true, false} {
		opts := []proxy.Option{proxy.WithMode(proxy.ModeHTTP), proxy.WithTrust(trust)}
		if withHeader {
			opts = append(opts, proxy.WithPeerHeader(""))
		}
		s, err := proxy.NewServer(backend, []hotcert.Provider{id}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		addr := serve(t, s)
		for _, h2 := range []bool{false, true} {
			req, _ := http.NewRequest("GET", "https://"+addr+"/", nil)
			req.Header.Set("X-Forwarded-Client-Cert", "Hash=forged;URI=spiffe://example.org/admin")
			resp, err := httpsClient(clientConfig(ca, leaf, "localhost"), h2).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if want := map[bool]int{false: 1, true: 2}[h2]; resp.ProtoMajor != want {
				t.Errorf("HTTP/%d, want HTTP/%d", resp.ProtoMajor, want)
			}
			got := (<-seen).Values("X-Forwarded-Client-Cert")
			want := []string(nil)
			if withHeader {
				want = []string{fmt.Sprintf(`Hash=%s;Subject="CN=web";URI=spiffe://example.org/web;DNS=web.example`, fingerprintHex(leaf))}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("peer header %v (option %v, h2 %v): got %q, want %q", withHeader, withHeader, h2, got, want)
			}
		}
	}
}

func fingerprintHex(l *hotcerttest.Leaf) string {
	return hotcert.FingerprintOf(l.Cert).String()
}

// gRPC through an HTTP-mode server: h2 with TLS in front, h2c to the backend,
// unary and server-streaming calls with trailers.
func TestServerHTTPProxiesGRPC(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	id := hotcert.NewStore(material(t, ca.MustIssue()))
	ln := listen(t)
	gs := grpc.NewServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	s, err := proxy.NewServer(proxy.Target{Network: "tcp", Address: ln.Addr().String()}, []hotcert.Provider{id}, proxy.WithMode(proxy.ModeHTTP))
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, s)
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(clientConfig(ca, nil, "localhost"))))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hc := healthpb.NewHealthClient(cc)
	if r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Check: %v, %v", r, err)
	}
	if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "unknown"}); err == nil {
		t.Fatal("a status error did not come through the trailers")
	}
	w, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := w.Recv(); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Watch: %v, %v", r, err)
	}
	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	if r, err := w.Recv(); err != nil || r.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("Watch after a change: %v, %v", r, err)
	}
}

// Requests keep flowing over HTTP/1.1 and HTTP/2 while the certificate rotates:
// none fails, and the connections move onto the new certificate.
func TestServerHTTPRotationFailsNoRequest(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	first := ca.MustIssue()
	id := hotcert.NewStore(material(t, first))
	backend := httpBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(time.Millisecond) // in flight when the drain comes
		io.WriteString(w, "ok")
	}))
	s, err := proxy.NewServer(backend, []hotcert.Provider{id}, proxy.WithMode(proxy.ModeHTTP), proxy.WithDrainWindow(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, s)
	second := ca.MustIssue()
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("h2=%v", h2), func(t *testing.T) {
			id.Set(material(t, first))
			var served [2]atomic.Int64 // by the first, by the second certificate
			var failed, done atomic.Int64
			cfg := clientConfig(ca, nil, "localhost")
			cfg.VerifyConnection = func(cs tls.ConnectionState) error {
				if cs.PeerCertificates[0].Equal(second.Cert) {
					served[1].Add(1)
				} else {
					served[0].Add(1)
				}
				return nil
			}
			client := httpsClient(cfg, h2)
			defer client.CloseIdleConnections()
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						resp, err := client.Get("https://" + addr + "/")
						if err != nil {
							failed.Add(1)
							t.Errorf("request failed: %v", err)
							return
						}
						b, err := io.ReadAll(resp.Body)
						resp.Body.Close()
						if err != nil || string(b) != "ok" {
							failed.Add(1)
							t.Errorf("response %q, %v", b, err)
							return
						}
						done.Add(1)
					}
				})
			}
			// Every worker holds a connection: without a drain, none would open another.
			testutil.WaitFor(t, "requests under the first certificate", func() bool { return done.Load() >= 100 })
			id.Set(material(t, second))
			deadline := time.Now().Add(10 * time.Second)
			for served[1].Load() == 0 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			close(stop)
			wg.Wait()
			t.Logf("handshakes: %d under the first certificate, %d under the second", served[0].Load(), served[1].Load())
			if served[1].Load() == 0 {
				t.Fatal("no connection moved onto the new certificate")
			}
			if failed.Load() != 0 {
				t.Fatalf("%d requests failed", failed.Load())
			}
		})
	}
}

// A peer header of another name is removed from a client's request even when no
// client certificate is asked for: a backend never trusts a claim the proxy did
// not make.
func TestServerHTTPStripsAPeerHeaderWithoutMTLS(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	id := hotcert.NewStore(material(t, ca.MustIssue()))
	seen := make(chan http.Header, 1)
	backend := httpBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen <- r.Header.Clone() }))
	s, err := proxy.NewServer(backend, []hotcert.Provider{id}, proxy.WithMode(proxy.ModeHTTP), proxy.WithPeerHeader("X-Client-Identity"))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", "https://"+serve(t, s)+"/", nil)
	req.Header.Set("X-Client-Identity", "URI=spiffe://example.org/admin")
	resp, err := httpsClient(clientConfig(ca, nil, "localhost"), false).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := (<-seen).Values("X-Client-Identity"); len(got) != 0 {
		t.Errorf("the backend got the client's own claim %q", got)
	}
}

// Shutdown lets a request in flight finish (HTTP/1.1 and HTTP/2), then Serve
// returns; the proxy refuses new connections meanwhile.
func TestServerHTTPShutdownFinishesInFlightRequests(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	id := hotcert.NewStore(material(t, ca.MustIssue()))
	arrived, release := make(chan struct{}, 2), make(chan struct{})
	backend := httpBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		io.WriteString(w, "finished")
	}))
	s, err := proxy.NewServer(backend, []hotcert.Provider{id}, proxy.WithMode(proxy.ModeHTTP))
	if err != nil {
		t.Fatal(err)
	}
	ln := listen(t)
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	results := make(chan string, 2)
	for _, h2 := range []bool{false, true} {
		go func() {
			resp, err := httpsClient(clientConfig(ca, nil, "localhost"), h2).Get("https://" + ln.Addr().String() + "/")
			if err != nil {
				results <- err.Error()
				return
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			results <- fmt.Sprintf("HTTP/%d %s %v", resp.ProtoMajor, b, err)
		}()
	}
	<-arrived
	<-arrived
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	testutil.WaitFor(t, "the listener closed", func() bool {
		c, err := tls.Dial("tcp", ln.Addr().String(), clientConfig(ca, nil, "localhost"))
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	close(release)
	got := []string{<-results, <-results}
	for _, r := range got {
		if !strings.HasSuffix(r, "finished <nil>") {
			t.Errorf("in-flight request: %s", r)
		}
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if err := <-served; !errors.Is(err, proxy.ErrServerClosed) {
		t.Errorf("Serve: %v", err)
	}
}

// An HTTP-mode client takes plaintext HTTP/1.1 from the local program and sends
// it over HTTP/2 with mTLS; after its certificate rotates, new requests reach the
// remote on a connection that presents the new one, and none fails.
func TestClientHTTPMovesOntoARotatedCertificate(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	remoteLn := listen(t)
	type seen struct {
		proto  int
		client string
	}
	got := make(chan seen, 1000)
	remote := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got <- seen{r.ProtoMajor, r.TLS.PeerCertificates[0].Subject.CommonName}
			io.WriteString(w, "remote")
		}),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{ca.MustIssue().TLSCertificate()},
			ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: hotcerttest.Pool(ca)},
	}
	go remote.ServeTLS(remoteLn, "", "")
	t.Cleanup(func() { remote.Close() })

	id := hotcert.NewStore(material(t, ca.MustIssue(hotcerttest.WithCommonName("app-1")), ca))
	c, err := proxy.NewClient(remoteLn.Addr().String(), id, proxy.WithMode(proxy.ModeHTTP), proxy.WithServerName("localhost"), proxy.WithDrainWindow(0))
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, c)
	local := &http.Client{}
	get := func() (seen, error) {
		resp, err := local.Get("http://" + addr + "/")
		if err != nil {
			return seen{}, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(b) != "remote" {
			return seen{}, fmt.Errorf("response %q, %v", b, err)
		}
		return <-got, nil
	}
	s, err := get()
	if err != nil || s.proto != 2 || s.client != "app-1" {
		t.Fatalf("first request: %+v, %v; want HTTP/2 from app-1", s, err)
	}
	id.Set(material(t, ca.MustIssue(hotcerttest.WithCommonName("app-2")), ca))
	testutil.WaitFor(t, "a request presenting the rotated certificate", func() bool {
		s, err := get()
		if err != nil {
			t.Fatalf("a request failed across the rotation: %v", err)
		}
		return s.client == "app-2"
	})
}

// In http mode too, a bundle change cuts at once the connections to a remote the
// new bundle no longer trusts (idle in the pool or busy), and keeps the others.
func TestClientHTTPCutsUntrustedRemotes(t *testing.T) {
	oldCA, newCA := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	id := hotcert.NewStore(material(t, newCA.MustIssue()))
	trust := hotcert.NewStore(material(t, nil, oldCA, newCA))
	serverOnly := hotcerttest.WithExtKeyUsages(x509.ExtKeyUsageServerAuth)
	var logs testutil.LogBuffer
	// open serves a TLS remote with leaf and a Client in front of it, makes one
	// request through it, and returns the Client's address and the count of the
	// remote's closed connections.
	open := func(leaf *hotcerttest.Leaf) (string, *atomic.Int64) {
		var closed atomic.Int64
		remote := &http.Server{
			Handler:   http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "remote") }),
			TLSConfig: &tls.Config{Certificates: []tls.Certificate{leaf.TLSCertificate()}},
			ConnState: func(_ net.Conn, s http.ConnState) {
				if s == http.StateClosed || s == http.StateHijacked {
					closed.Add(1)
				}
			},
		}
		ln := listen(t)
		go remote.ServeTLS(ln, "", "")
		t.Cleanup(func() { remote.Close() })
		c, err := proxy.NewClient(ln.Addr().String(), id, proxy.WithMode(proxy.ModeHTTP), proxy.WithTrust(trust),
			proxy.WithServerName("localhost"), proxy.WithDrainWindow(time.Hour), proxy.WithGrace(time.Hour),
			proxy.WithIdle(time.Hour), proxy.WithLogger(logger(&logs)))
		if err != nil {
			t.Fatal(err)
		}
		addr := serve(t, c)
		resp, err := http.Get("http://" + addr + "/")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "remote" {
			t.Fatalf("through the client: %q", b)
		}
		return addr, &closed
	}
	_, oldClosed := open(oldCA.MustIssue(serverOnly))
	_, newClosed := open(newCA.MustIssue(serverOnly))
	trust.Set(material(t, nil, newCA))
	testutil.WaitFor(t, "the connection to the untrusted remote closed", func() bool { return oldClosed.Load() == 1 })
	if n := newClosed.Load(); n != 0 {
		t.Errorf("%d connections to the trusted remote closed", n)
	}
	// The line follows the close: wait for it, then count.
	testutil.WaitFor(t, "the cut's log line", func() bool { return logs.Count("closing connection: peer certificate no longer trusted") > 0 })
	if n := logs.Count("closing connection: peer certificate no longer trusted"); n != 1 {
		t.Errorf("%d cut log lines, want 1\n%s", n, logs.String())
	}
}
