package httptls_test

import (
	"context"
	"crypto/tls"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/httptls"
	"github.com/hotcert/hotcert/tlsconfig"
)

type server struct {
	port   string
	closed atomic.Int32 // connections the server saw closed
}

func startHTTPS(t *testing.T, cfg *tls.Config) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{}
	_, s.port, _ = net.SplitHostPort(ln.Addr().String())
	srv := &http.Server{
		TLSConfig: cfg,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
				_, _ = io.WriteString(w, r.TLS.PeerCertificates[0].Subject.CommonName)
			}
		}),
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateClosed {
				s.closed.Add(1)
			}
		},
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { srv.Close() })
	return s
}

type reply struct {
	proto  string
	serial *big.Int
	reused bool
	body   string
}

func get(t *testing.T, rt http.RoundTripper, url string) reply {
	t.Helper()
	var r reply
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { r.reused = i.Reused }})
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r.proto, r.body = resp.Proto, string(b)
	r.serial = resp.TLS.PeerCertificates[0].SerialNumber
	return r
}

func material(t *testing.T, leaf *hotcerttest.Leaf, cas ...*hotcerttest.CA) *hotcert.Material {
	t.Helper()
	c := hotcert.Content{CA: hotcert.Input{Name: "ca.crt", Data: hotcerttest.BundlePEM(cas...)}}
	if leaf != nil {
		c.Cert = hotcert.Input{Name: "tls.crt", Data: leaf.ChainPEM}
		c.Key = hotcert.Input{Name: "tls.key", Data: leaf.KeyPEM}
	}
	m, err := hotcert.Validate(c)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestServerNegotiatesHTTP2AndHTTP1(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	leaf := ca.MustIssue()
	srv := startHTTPS(t, httptls.ServerConfig(hotcert.NewStore(material(t, leaf, ca))))
	tr := httptls.NewTransport(hotcert.NewStore(material(t, nil, ca)))
	defer tr.Close()
	for _, host := range []string{"127.0.0.1", "localhost"} {
		r := get(t, tr, "https://"+net.JoinHostPort(host, srv.port)+"/")
		if r.proto != "HTTP/2.0" || r.serial.Cmp(leaf.Cert.SerialNumber) != 0 {
			t.Fatalf("%s: %s, serial %x", host, r.proto, r.serial)
		}
	}
	h1 := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: hotcerttest.Pool(ca)}}
	defer h1.CloseIdleConnections()
	if r := get(t, h1, "https://127.0.0.1:"+srv.port+"/"); r.proto != "HTTP/1.1" {
		t.Fatalf("an HTTP/1.1-only client got %s", r.proto)
	}
}

// TestTransportFollowsRotation: an idle connection survives a server certificate
// rotation (established connections keep what they were opened with); a change of
// the client's bundle closes it, and the next request handshakes anew.
func TestTransportFollowsRotation(t *testing.T) {
	oldCA, newCA := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	oldLeaf, newLeaf := oldCA.MustIssue(), newCA.MustIssue()
	srvStore := hotcert.NewStore(material(t, oldLeaf, oldCA))
	srv := startHTTPS(t, httptls.ServerConfig(srvStore))
	trust := hotcert.NewStore(material(t, nil, oldCA))
	tr := httptls.NewTransport(trust)
	defer tr.Close()
	url := "https://127.0.0.1:" + srv.port + "/"

	if r := get(t, tr, url); r.serial.Cmp(oldLeaf.Cert.SerialNumber) != 0 {
		t.Fatalf("first request: serial %x", r.serial)
	}
	srvStore.Set(material(t, newLeaf, newCA))
	if r := get(t, tr, url); !r.reused || r.serial.Cmp(oldLeaf.Cert.SerialNumber) != 0 {
		t.Fatalf("after the server rotation the idle connection should carry on: reused=%v serial %x", r.reused, r.serial)
	}

	trust.Set(material(t, nil, oldCA, newCA))
	deadline := time.Now().Add(10 * time.Second)
	for srv.closed.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the idle connection was not closed after the bundle changed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if r := get(t, tr, url); r.reused || r.serial.Cmp(newLeaf.Cert.SerialNumber) != 0 {
		t.Fatalf("after the bundle change: reused=%v serial %x, want a new connection to %x", r.reused, r.serial, newLeaf.Cert.SerialNumber)
	}

	// The old CA leaves the bundle, the server goes back to it: refused.
	trust.Set(material(t, nil, newCA))
	srvStore.Set(material(t, oldCA.MustIssue(), oldCA))
	for srv.closed.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the idle connection was not closed after the bundle changed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if resp, err := (&http.Client{Transport: tr}).Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("a server on the removed CA was accepted")
	}
}

func TestMutualTLS(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	srv := startHTTPS(t, httptls.MTLSServerConfig(hotcert.NewStore(material(t, ca.MustIssue(), ca))))
	client := hotcert.NewStore(material(t, ca.MustIssue(hotcerttest.WithCommonName("client-1")), ca))
	tr := httptls.NewTransport(client, tlsconfig.WithServerName("localhost"))
	defer tr.Close()
	url := "https://127.0.0.1:" + srv.port + "/"
	if r := get(t, tr, url); r.body != "client-1" || r.proto != "HTTP/2.0" {
		t.Fatalf("server saw %q over %s", r.body, r.proto)
	}
	client.Set(material(t, ca.MustIssue(hotcerttest.WithCommonName("client-2")), ca))
	deadline := time.Now().Add(10 * time.Second)
	for srv.closed.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the idle connection was not closed after the client certificate changed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if r := get(t, tr, url); r.body != "client-2" {
		t.Fatalf("after the client certificate rotation the server saw %q", r.body)
	}
}
