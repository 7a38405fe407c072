package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
)

// pythonTLSServer is a program that cannot reload: python's http.server with its
// listening socket wrapped in an ssl.SSLContext that reads the certificate once, at
// start. Renewing its certificate means restarting it.
const pythonTLSServer = `
import http.server, ssl, sys
port, crt, key, root = sys.argv[1:5]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(crt, key)
class Handler(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *a, **k):
        super().__init__(*a, directory=root, **k)
    def log_message(self, *a):
        pass
srv = http.server.ThreadingHTTPServer(("127.0.0.1", int(port)), Handler)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
srv.serve_forever()
`

// servedLeaf returns the leaf certificate the TLS server at addr presents.
func servedLeaf(addr string, roots *x509.CertPool) (*x509.Certificate, error) {
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0], nil
}

// The rotation of a program that cannot reload, measured both ways with the same
// client load: (A) the certificate is renewed and the TLS-terminating python
// server restarted to pick it up, as a rollout would; (B) the same python server
// serves plaintext behind hotcert proxy server, and the certificate is renewed
// under the proxy. B fails no request; A's failures are reported, not judged (a
// restart can be lucky), but A's restarted server must serve the new certificate.
func TestProxyRestartVersusProxyRotation(t *testing.T) {
	requireTool(t, "python3")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ca := hotcerttest.MustNewCA()
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	root := t.TempDir()
	docs := filepath.Join(root, "www")
	if err := os.MkdirAll(docs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(docs, "hello.txt"), []byte("hello from python\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "tls_server.py")
	if err := os.WriteFile(script, []byte(pythonTLSServer), 0o644); err != nil {
		t.Fatal(err)
	}
	tlsDir := hotcerttest.MustNewAtomicWriter(filepath.Join(root, "tls"))
	write := func(l *hotcerttest.Leaf) {
		tlsDir.MustWrite(map[string][]byte{"tls.crt": l.ChainPEM, "tls.key": l.KeyPEM})
	}
	crt, key := filepath.Join(tlsDir.Dir(), "tls.crt"), filepath.Join(tlsDir.Dir(), "tls.key")

	// measure runs a client load (4 loops, keep-alive and fresh connections) on
	// https://addr, calls rotate once 200 requests succeeded, and stops 200
	// successful requests after rotate returned; it returns the counts.
	measure := func(addr string, rotate func()) (ok, failed int64, errs []string) {
		l := &load{stop: make(chan struct{})}
		for i := range 4 {
			tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, DisableKeepAlives: i%2 == 1}
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr, Timeout: 5 * time.Second}
			l.run(fmt.Sprint("loop ", i), func() error {
				resp, err := c.Get("https://" + addr + "/hello.txt")
				if err != nil {
					return err
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				if err != nil || string(b) != "hello from python\n" {
					return fmt.Errorf("%s %q %v", resp.Status, b, err)
				}
				return nil
			})
		}
		l.waitMore(t, 200)
		rotate()
		l.waitMore(t, 200)
		close(l.stop)
		l.wg.Wait()
		return l.ok.Load(), l.failed.Load(), l.errs
	}

	// A: the python server terminates TLS itself and is restarted on renewal.
	first := ca.MustIssue()
	write(first)
	addrA := freeAddr(t)
	var proc atomic.Pointer[exec.Cmd]
	startPython := func() {
		cmd := exec.Command("python3", script, addrA[strings.LastIndex(addrA, ":")+1:], crt, key, docs)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		proc.Store(cmd)
		testutil.WaitFor(t, "the python TLS server", func() bool { _, err := servedLeaf(addrA, roots); return err == nil })
	}
	startPython()
	t.Cleanup(func() { c := proc.Load(); c.Process.Kill(); c.Wait() })
	renewedA := ca.MustIssue()
	var restart time.Duration
	okA, failedA, errsA := measure(addrA, func() {
		write(renewedA)
		began := time.Now()
		old := proc.Load()
		old.Process.Signal(syscall.SIGTERM) // as the kubelet stops a container
		old.Wait()
		startPython()
		restart = time.Since(began)
	})
	if leaf, err := servedLeaf(addrA, roots); err != nil || !leaf.Equal(renewedA.Cert) {
		t.Fatalf("the restarted python server does not serve the renewed certificate (err %v)", err)
	}
	t.Logf("restart: %d requests, %d failed across the restart (%v from stop to serving); first errors: %q", okA+failedA, failedA, restart.Round(time.Millisecond), errsA)

	// B: the same python server, plaintext, behind hotcert proxy server.
	write(first)
	python := pythonHTTPServer(t)
	addrB, metrics := freeAddr(t), freeAddr(t)
	proxyRun(t, ctx, io.Discard, metrics, "server", "--mode", "http", "--listen", addrB, "--target", python,
		"--cert-file", crt, "--key-file", key, "--poll-interval", "50ms", "--settle", "100ms", "--drain-window", "100ms")
	renewedB := ca.MustIssue()
	okB, failedB, errsB := measure(addrB, func() {
		write(renewedB)
		testutil.WaitFor(t, "the renewal served by the proxy", func() bool {
			leaf, err := servedLeaf(addrB, roots)
			return err == nil && leaf.Equal(renewedB.Cert)
		})
	})
	t.Logf("proxy: %d requests, %d failed across the renewal", okB+failedB, failedB)
	if failedB != 0 {
		t.Fatalf("%d of %d requests failed across a renewal behind the proxy: %q", failedB, okB+failedB, errsB)
	}
}
