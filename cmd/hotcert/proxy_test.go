package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
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
)

// requireTool fails the test when a program the test runs is missing.
func requireTool(t *testing.T, names ...string) {
	t.Helper()
	for _, name := range names {
		if _, err := exec.LookPath(name); err != nil {
			t.Fatalf("%s is not installed (hack/tools.sh installs it): %v", name, err)
		}
	}
}

// pythonHTTPServer runs `python3 -m http.server` on a free loopback port serving
// a directory with hello.txt; the program reads nothing of TLS and cannot reload.
func pythonHTTPServer(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hello from python\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	port := addr[strings.LastIndex(addr, ":")+1:]
	cmd := exec.Command("python3", "-m", "http.server", port, "--bind", "127.0.0.1", "--directory", dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	testutil.WaitFor(t, "python3 -m http.server", func() bool {
		resp, err := http.Get("http://" + addr + "/hello.txt")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	return addr
}

// rotationFiles are the files of the proxy and of its clients, each directory
// written the way the kubelet updates a mounted Secret.
type rotationFiles struct {
	server, clientCA, client, trust *hotcerttest.AtomicWriter
}

func (f *rotationFiles) path(w *hotcerttest.AtomicWriter, name string) string {
	return filepath.Join(w.Dir(), name)
}

// proxyRun starts hotcert proxy with args and waits for /healthz to say 200.
func proxyRun(t *testing.T, ctx context.Context, log io.Writer, metricsAddr string, args ...string) chan error {
	t.Helper()
	done := start(ctx, log, append([]string{"proxy"}, append(args, "--metrics-bind-address", metricsAddr, "--log-format", "json")...)...)
	testutil.WaitFor(t, "the proxy's /healthz", func() bool {
		select {
		case err := <-done:
			t.Fatalf("hotcert proxy exited: %v\n%v", err, log)
		default:
		}
		resp, err := http.Get("http://" + metricsAddr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return done
}

// load runs request loops until stop, counting successes and failures.
type load struct {
	ok, failed atomic.Int64
	mu         sync.Mutex
	errs       []string
	wg         sync.WaitGroup
	stop       chan struct{}
}

func (l *load) run(name string, do func() error) {
	l.wg.Go(func() {
		for {
			select {
			case <-l.stop:
				return
			default:
			}
			if err := do(); err != nil {
				l.failed.Add(1)
				l.mu.Lock()
				if len(l.errs) < 10 {
					l.errs = append(l.errs, name+": "+err.Error())
				}
				l.mu.Unlock()
				continue
			}
			l.ok.Add(1)
		}
	})
}

// waitMore waits for n more successful requests.
func (l *load) waitMore(t *testing.T, n int64) {
	t.Helper()
	want := l.ok.Load() + n
	testutil.WaitFor(t, fmt.Sprintf("%d more requests", n), func() bool { return l.ok.Load() >= want })
}

// HTTP/1.1 and h2 (curl, and Go clients holding their connections) to python's
// http.server, and gRPC to a plaintext gRPC server, through hotcert proxy server
// in http mode with mTLS, across a renewal, the three-step CA rotation and a bad
// write: no request fails, the bad write is refused once and the last good
// certificate keeps serving, and /metrics says what the proxy holds.
func TestProxyServerRotatesForProgramsThatCannotReload(t *testing.T) {
	requireTool(t, "python3", "curl", "openssl")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	root := t.TempDir()
	f := &rotationFiles{
		server:   hotcerttest.MustNewAtomicWriter(filepath.Join(root, "server-tls")),
		clientCA: hotcerttest.MustNewAtomicWriter(filepath.Join(root, "client-ca")),
		client:   hotcerttest.MustNewAtomicWriter(filepath.Join(root, "client-tls")),
		trust:    hotcerttest.MustNewAtomicWriter(filepath.Join(root, "client-trust")),
	}
	oldCA, newCA := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	const clientID = "spiffe://example.org/ns/shop/sa/web"
	writeServer := func(l *hotcerttest.Leaf) {
		f.server.MustWrite(map[string][]byte{"tls.crt": l.ChainPEM, "tls.key": l.KeyPEM})
	}
	// The clients read their key pair from one file, tls.pem, once: a
	// client that opens its files one after the other by path can see a
	// pair from two different writes (the swap of ..data falls between the
	// two opens), a race of the client with its own volume, not the
	// proxy's. curl opens its --cert file twice (the certificate, then the
	// key), so it is given a copy read once (curlPair).
	writeClient := func(l *hotcerttest.Leaf) {
		f.client.MustWrite(map[string][]byte{"tls.crt": l.ChainPEM, "tls.key": l.KeyPEM,
			"tls.pem": append(append([]byte{}, l.ChainPEM...), l.KeyPEM...)})
	}
	writeBundles := func(cas ...*hotcerttest.CA) {
		f.clientCA.MustWrite(map[string][]byte{"ca.crt": hotcerttest.BundlePEM(cas...)})
		f.trust.MustWrite(map[string][]byte{"ca.crt": hotcerttest.BundlePEM(cas...)})
	}
	serverLeaf := oldCA.MustIssue()
	writeServer(serverLeaf)
	writeClient(oldCA.MustIssue(hotcerttest.WithURIs(clientID)))
	writeBundles(oldCA)

	python := pythonHTTPServer(t)
	grpcAddr := freeAddr(t)
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, health.NewServer())
	gln, err := net.Listen("tcp", grpcAddr)
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(gln)
	defer gs.Stop()

	var logs testutil.LogBuffer
	common := []string{"--mode", "http", "--cert-file", f.path(f.server, "tls.crt"), "--key-file", f.path(f.server, "tls.key"),
		"--ca-file", f.path(f.clientCA, "ca.crt"), "--allow-spiffe-id", clientID, "--drain-window", "100ms",
		"--poll-interval", "50ms", "--settle", "100ms"}
	httpAddr, httpMetrics := freeAddr(t), freeAddr(t)
	httpDone := proxyRun(t, ctx, &logs, httpMetrics, append([]string{"server", "--listen", httpAddr, "--target", python, "--peer-header", "X-Forwarded-Client-Cert"}, common...)...)
	grpcProxy, grpcMetrics := freeAddr(t), freeAddr(t)
	grpcDone := proxyRun(t, ctx, io.Discard, grpcMetrics, append([]string{"server", "--listen", grpcProxy, "--target", grpcAddr, "--component", "proxy_grpc"}, common...)...)

	// Go clients re-read their files at every handshake, as a program that
	// follows its mounted Secret would.
	var servedNew atomic.Int64
	var wantLeaf atomic.Pointer[hotcerttest.Leaf]
	wantLeaf.Store(serverLeaf)
	clientTLS := func() *tls.Config {
		return &tls.Config{
			InsecureSkipVerify: true, // verified below against the current trust file, by name
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				pair, err := os.ReadFile(f.path(f.client, "tls.pem"))
				if err != nil {
					return nil, err
				}
				c, err := tls.X509KeyPair(pair, pair)
				return &c, err
			},
			VerifyConnection: func(cs tls.ConnectionState) error {
				pem, err := os.ReadFile(f.path(f.trust, "ca.crt"))
				if err != nil {
					return err
				}
				m, err := hotcert.Validate(hotcert.Content{CA: hotcert.Input{Name: "ca.crt", Data: pem}})
				if err != nil {
					return err
				}
				if _, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: m.TrustPool(), DNSName: "127.0.0.1"}); err != nil {
					return err
				}
				if cs.PeerCertificates[0].Equal(wantLeaf.Load().Cert) {
					servedNew.Add(1)
				}
				return nil
			},
		}
	}
	h1 := &http.Client{Transport: &http.Transport{TLSClientConfig: clientTLS(), MaxIdleConnsPerHost: 8, TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}}
	h2 := &http.Client{Transport: &http.Transport{TLSClientConfig: clientTLS(), ForceAttemptHTTP2: true}}
	get := func(c *http.Client, proto int) func() error {
		return func() error {
			resp, err := c.Get("https://" + httpAddr + "/hello.txt")
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil || string(b) != "hello from python\n" || resp.ProtoMajor != proto {
				return fmt.Errorf("HTTP/%d %s %q %v", resp.ProtoMajor, resp.Status, b, err)
			}
			return nil
		}
	}
	// curlPair is the client's key pair as one read of tls.pem saw it, in a
	// file of its own, as a program that reads its files once at start
	// holds them.
	curlPair := func() (string, error) {
		pair, err := os.ReadFile(f.path(f.client, "tls.pem"))
		if err != nil {
			return "", err
		}
		tmp, err := os.CreateTemp(root, "curl-pair-*.pem")
		if err != nil {
			return "", err
		}
		_, err = tmp.Write(pair)
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		return tmp.Name(), err
	}
	curl := func(proto string) func() error {
		return func() error {
			pair, err := curlPair()
			defer os.Remove(pair)
			if err != nil {
				return fmt.Errorf("curl %s: its key pair: %w", proto, err)
			}
			out, err := exec.Command("curl", "-sS", "--fail", proto, "--cacert", f.path(f.trust, "ca.crt"),
				"--cert", pair,
				"-w", "\n%{http_version}", "https://"+httpAddr+"/hello.txt").CombinedOutput()
			if err != nil || !strings.HasPrefix(string(out), "hello from python\n") {
				return fmt.Errorf("curl %s: %v: %s", proto, err, out)
			}
			return nil
		}
	}
	cc, err := grpc.NewClient(grpcProxy, grpc.WithTransportCredentials(credentials.NewTLS(clientTLS())))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	hc := healthpb.NewHealthClient(cc)

	l := &load{stop: make(chan struct{})}
	l.run("go h1", get(h1, 1))
	l.run("go h2", get(h2, 2))
	l.run("curl --http1.1", curl("--http1.1"))
	l.run("curl --http2", curl("--http2"))
	l.run("grpc", func() error {
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		defer rcancel()
		_, err := hc.Check(rctx, &healthpb.HealthCheckRequest{})
		return err
	})
	l.waitMore(t, 50)

	// openssl negotiates h2 with the proxy and verifies its chain.
	out, err := exec.Command("openssl", "s_client", "-connect", httpAddr, "-alpn", "h2", "-CAfile", f.path(f.trust, "ca.crt"),
		"-cert", f.path(f.client, "tls.crt"), "-key", f.path(f.client, "tls.key"), "-verify_return_error").CombinedOutput()
	if !strings.Contains(string(out), "ALPN protocol: h2") || !strings.Contains(string(out), "Verify return code: 0 (ok)") {
		t.Fatalf("openssl s_client -alpn h2: %v\n%s", err, out)
	}

	moveTo := func(step string, l2 *hotcerttest.Leaf) {
		t.Helper()
		wantLeaf.Store(l2)
		servedNew.Store(0)
		writeServer(l2)
		testutil.WaitFor(t, step+": the new certificate served", func() bool { return servedNew.Load() >= 2 })
		requireMetricEventually(t, httpMetrics, fmt.Sprintf(`hotcert_tls_cert_info{component="proxy",issuer=%q,serial=%q,sha256=%q} 1`,
			l2.Cert.Issuer.String(), hotcert.FormatSerial(l2.Cert.SerialNumber), hotcert.FingerprintOf(l2.Cert).String()))
		l.waitMore(t, 50)
	}
	// Renewal.
	moveTo("renewal", oldCA.MustIssue())
	// Step 1: both CAs trusted everywhere.
	writeBundles(oldCA, newCA)
	requireMetricEventually(t, httpMetrics, `hotcert_tls_ca_bundle_certificates{component="proxy_ca"} 2`)
	l.waitMore(t, 50)
	// Step 2: certificates from the new CA, the clients' and the proxy's.
	writeClient(newCA.MustIssue(hotcerttest.WithURIs(clientID)))
	moveTo("new-CA leaf", newCA.MustIssue())
	// Step 3: the old CA removed.
	writeBundles(newCA)
	requireMetricEventually(t, httpMetrics, `hotcert_tls_ca_bundle_certificates{component="proxy_ca"} 1`)
	l.waitMore(t, 50)
	// A bad write: a key that does not match. Refused once, the last good serves.
	good := wantLeaf.Load()
	f.server.MustWrite(map[string][]byte{"tls.crt": newCA.MustIssue().ChainPEM, "tls.key": good.KeyPEM})
	requireMetricEventually(t, httpMetrics, `hotcert_tls_reload_failures_total{component="proxy"} 1`)
	servedNew.Store(0)
	h1.CloseIdleConnections()
	testutil.WaitFor(t, "the last good certificate served after the bad write", func() bool { return servedNew.Load() >= 1 })
	l.waitMore(t, 50)

	close(l.stop)
	l.wg.Wait()
	t.Logf("%d requests through the proxies, %d failed", l.ok.Load(), l.failed.Load())
	if l.failed.Load() != 0 {
		t.Fatalf("%d requests failed: %s", l.failed.Load(), strings.Join(l.errs, "\n"))
	}
	if n := strings.Count(logs.String(), `"msg":"TLS certificate reload failed"`); n != 1 {
		t.Errorf("%d reload-failure lines, want 1", n)
	}
	cancel()
	for _, d := range []chan error{httpDone, grpcDone} {
		if err := <-d; err != nil {
			t.Errorf("hotcert proxy after SIGTERM: %v", err)
		}
	}
}

// opensslServer runs `openssl s_server -www` requiring a client certificate from
// ca: its page describes the client certificate of each connection.
func opensslServer(t *testing.T, leaf *hotcerttest.Leaf, ca *hotcerttest.CA) string {
	t.Helper()
	addr := freeAddr(t)
	crt, key := writeTemp(t, "remote.crt", leaf.ChainPEM), writeTemp(t, "remote.key", leaf.KeyPEM)
	cmd := exec.Command("openssl", "s_server", "-accept", addr, "-cert", crt, "-key", key,
		"-CAfile", writeTemp(t, "ca.crt", hotcerttest.BundlePEM(ca)), "-Verify", "1", "-www", "-quiet")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	testutil.WaitFor(t, "openssl s_server", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return addr
}

// hotcert proxy client in tcp mode in front of curl (plaintext) and openssl
// s_server (mTLS): the remote sees the client certificate of the files, a renewed
// one on the next connection, and a remote the bundle does not trust is refused.
// hotcert proxy server in tcp mode in front of python's http.server serves curl
// across a renewal.
func TestProxyClientAndTCPServer(t *testing.T) {
	requireTool(t, "python3", "curl", "openssl")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ca, otherCA := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	tlsDir := hotcerttest.MustNewAtomicWriter(filepath.Join(t.TempDir(), "tls"))
	write := func(l *hotcerttest.Leaf) {
		tlsDir.MustWrite(map[string][]byte{"tls.crt": l.ChainPEM, "tls.key": l.KeyPEM, "ca.crt": hotcerttest.BundlePEM(ca)})
	}
	first := ca.MustIssue(hotcerttest.WithCommonName("app-1"))
	write(first)
	crt, key, bundle := filepath.Join(tlsDir.Dir(), "tls.crt"), filepath.Join(tlsDir.Dir(), "tls.key"), filepath.Join(tlsDir.Dir(), "ca.crt")
	page := func(addr string) string {
		out, err := exec.Command("curl", "-sS", "--max-time", "10", "http://"+addr+"/").CombinedOutput()
		if err != nil {
			return "curl: " + err.Error() + ": " + string(out)
		}
		return string(out)
	}

	remote := opensslServer(t, ca.MustIssue(), ca)
	local, metricsAddr := freeAddr(t), freeAddr(t)
	var logs testutil.LogBuffer
	proxyRun(t, ctx, &logs, metricsAddr, "client", "--listen", local, "--target", remote, "--ca-file", bundle,
		"--cert-file", crt, "--key-file", key, "--poll-interval", "50ms", "--drain-window", "0")
	if p := page(local); !strings.Contains(p, "Subject: CN=app-1") {
		t.Fatalf("openssl s_server did not see the client certificate:\n%s", p)
	}
	write(ca.MustIssue(hotcerttest.WithCommonName("app-2")))
	testutil.WaitFor(t, "the renewed client certificate at the remote", func() bool { return strings.Contains(page(local), "Subject: CN=app-2") })

	untrusted := opensslServer(t, otherCA.MustIssue(), ca)
	local2 := freeAddr(t)
	proxyRun(t, ctx, &logs, freeAddr(t), "client", "--listen", local2, "--target", untrusted, "--ca-file", bundle,
		"--cert-file", crt, "--key-file", key)
	if p := page(local2); strings.Contains(p, "Client certificate") {
		t.Fatalf("the proxy reached a remote its bundle does not trust:\n%s", p)
	}
	testutil.WaitFor(t, "the refusal in the log", func() bool { return strings.Contains(logs.String(), "certificate signed by unknown authority") })

	python := pythonHTTPServer(t)
	front := freeAddr(t)
	proxyRun(t, ctx, io.Discard, freeAddr(t), "server", "--listen", front, "--target", python,
		"--cert-file", crt, "--key-file", key, "--poll-interval", "50ms", "--idle", "50ms")
	get := func() string {
		out, _ := exec.Command("curl", "-sS", "-v", "--max-time", "10", "--cacert", bundle, "--resolve", "localhost:"+front[strings.LastIndex(front, ":")+1:]+":127.0.0.1",
			"https://localhost:"+front[strings.LastIndex(front, ":")+1:]+"/hello.txt").CombinedOutput()
		return string(out)
	}
	if p := get(); !strings.Contains(p, "\nhello from python\n") || !strings.Contains(p, "subject: CN=app-2") {
		t.Fatalf("curl through the tcp-mode proxy: %s", p)
	}
	renewed := ca.MustIssue(hotcerttest.WithCommonName("app-3"))
	write(renewed)
	testutil.WaitFor(t, "the renewal served to curl", func() bool {
		p := get()
		return strings.Contains(p, "\nhello from python\n") && strings.Contains(p, "subject: CN=app-3")
	})
}

// Bad input is a one-line error, also when it is found after the files loaded
// (the reloaders then stop, and the command returns).
func TestProxyStartupErrors(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	leaf := ca.MustIssue()
	crt, key, bundle := writeTemp(t, "tls.crt", leaf.ChainPEM), writeTemp(t, "tls.key", leaf.KeyPEM), writeTemp(t, "ca.crt", ca.CertPEM)
	busy := freeAddr(t)
	ln, err := net.Listen("tcp", busy)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"server", "--cert-file", crt, "--key-file", key}, "--target is required"},
		{[]string{"server", "--target", "127.0.0.1:1", "--cert-file", crt}, "--cert-file and --key-file go in pairs"},
		{[]string{"server", "--target", "127.0.0.1:1", "--cert-file", crt, "--key-file", key, "--ca-file", bundle}, "--ca-file needs --allow-dns"},
		{[]string{"server", "--target", "127.0.0.1:1", "--cert-file", crt, "--key-file", key, "--allow-all"}, "--allow-* need --ca-file"},
		{[]string{"server", "--target", "127.0.0.1:1", "--cert-file", crt, "--key-file", bundle}, "--key-file"},
		{[]string{"server", "--target", "127.0.0.1:1", "--cert-file", crt, "--key-file", key, "--mode", "udp"}, `mode "udp"`},
		{[]string{"server", "--target", "127.0.0.1:1", "--cert-file", crt, "--key-file", key, "--listen", busy}, "--listen " + busy},
		{[]string{"server", "--target", "nowhere", "--cert-file", crt, "--key-file", key}, "--target"},
		{[]string{"client", "--target", "127.0.0.1:1"}, "--ca-file is required"},
		{[]string{"client", "--target", "127.0.0.1:1", "--ca-file", bundle, "--peer-header", "X-Id"}, "unknown flag: --peer-header"},
		{[]string{"server", "--target", "127.0.0.1:1", "--spiffe-socket", "/run/agent.sock", "--allow-all"}, "--spiffe-socket \"/run/agent.sock\": want unix://"},
		{[]string{"server", "--target", "127.0.0.1:1", "--spiffe-socket", "unix:///run/agent.sock", "--cert-file", crt, "--key-file", key, "--allow-all"}, "--spiffe-socket gives the certificate and the CA bundle"},
		{[]string{"client", "--target", "127.0.0.1:1", "--spiffe-socket", "unix:///run/agent.sock", "--ca-file", bundle}, "--spiffe-socket gives the certificate and the CA bundle"},
		{[]string{"server", "--target", "127.0.0.1:1", "--spiffe-socket", "unix:///run/agent.sock"}, "--spiffe-socket needs --allow-dns"},
		// No agent on the socket: the Workload API is unavailable until the wait ends.
		{[]string{"server", "--target", "127.0.0.1:1", "--spiffe-socket", "unix://" + filepath.Join(t.TempDir(), "agent.sock"), "--allow-all",
			"--spiffe-initial-wait", "200ms"}, "the Workload API is unavailable (is the agent running?)"},
	} {
		// No deadline on the command: it must return on its own.
		done := make(chan error, 1)
		go func() { _, _, err := run(context.Background(), append([]string{"proxy"}, tc.args...)...); done <- err }()
		select {
		case err := <-done:
			requireOneLine(t, err, tc.want)
		case <-time.After(time.Minute):
			t.Fatalf("hotcert proxy %v did not return", tc.args)
		}
	}
}

// Identities by SNI from the command line: a --cert-file pair and a
// --credential-bundle (a podCertificate volume's key-and-chain file), each
// reported under its own component.
func TestProxyServerIdentitiesBySNI(t *testing.T) {
	requireTool(t, "openssl")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ca := hotcerttest.MustNewCA()
	a := ca.MustIssue(hotcerttest.WithCommonName("a"), hotcerttest.WithDNSNames("a.example"))
	b := ca.MustIssue(hotcerttest.WithCommonName("b"), hotcerttest.WithDNSNames("b.example"))
	bundle := writeTemp(t, "credentialbundle.pem", append(append([]byte{}, b.KeyPEM...), b.ChainPEM...))
	addr, metricsAddr := freeAddr(t), freeAddr(t)
	proxyRun(t, ctx, io.Discard, metricsAddr, "server", "--listen", addr, "--target", freeAddr(t),
		"--cert-file", writeTemp(t, "a.crt", a.ChainPEM), "--key-file", writeTemp(t, "a.key", a.KeyPEM), "--credential-bundle", bundle)
	for name, want := range map[string]string{"a.example": "CN = a", "b.example": "CN = b"} {
		out, _ := exec.Command("openssl", "s_client", "-connect", addr, "-servername", name, "-CAfile", writeTemp(t, "ca.crt", ca.CertPEM),
			"-verify_hostname", name, "-verify_return_error").CombinedOutput()
		if !strings.Contains(string(out), "subject="+want) || !strings.Contains(string(out), "Verify return code: 0 (ok)") {
			t.Errorf("SNI %s: want %s, verified:\n%s", name, want, out)
		}
	}
	requireMetric(t, metricsAddr, fmt.Sprintf(`hotcert_tls_cert_info{component="proxy_2",issuer=%q,serial=%q,sha256=%q} 1`,
		b.Cert.Issuer.String(), hotcert.FormatSerial(b.Cert.SerialNumber), hotcert.FingerprintOf(b.Cert).String()))
}
