package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
)

// proxyHealthz reads the deny_list object of a proxy's /healthz (with
// ?revoked_serial=serial when not "").
func proxyHealthz(t *testing.T, metricsAddr, serial string) (dl struct {
	Version           string `json:"version"`
	Generation        uint64 `json:"generation"`
	Serials           int    `json:"serials"`
	Policy            string `json:"stale_crl_policy"`
	Connections       int    `json:"connections"`
	DeniedConnections int    `json:"denied_connections"`
	Serial            *struct {
		Revoked     bool `json:"revoked"`
		Connections int  `json:"connections"`
	} `json:"serial"`
}) {
	t.Helper()
	u := "http://" + metricsAddr + "/healthz"
	if serial != "" {
		u += "?revoked_serial=" + serial
	}
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		DenyList *json.RawMessage `json:"deny_list"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || st.DenyList == nil {
		t.Fatalf("/healthz: %v, deny_list %v", err, st.DenyList)
	}
	if err := json.Unmarshal(*st.DenyList, &dl); err != nil {
		t.Fatal(err)
	}
	return dl
}

// TestProxyServerDenyListCutsRevokedClients: hotcert proxy server with
// --deny-list, in http mode and in tcp mode, in front of python's http.server.
// When the deny list (a kubelet-style mounted file) adds a client's serial, that
// client's open connections end — an HTTP/2 connection in http mode, a forwarded
// connection in tcp mode — and it is refused (a Go client and curl), while another
// client keeps its connections; /healthz and hotcert_tls_deny_list_info say which
// list the proxy enforces, and hotcert rotation status --revoked-serial, reading
// the proxies' /healthz, says the serial is refused with no connection left.
func TestProxyServerDenyListCutsRevokedClients(t *testing.T) {
	requireTool(t, "python3", "curl")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	root := t.TempDir()
	tlsDir := hotcerttest.MustNewAtomicWriter(filepath.Join(root, "tls"))
	denyDir := hotcerttest.MustNewAtomicWriter(filepath.Join(root, "deny"))
	ca := hotcerttest.MustNewCA()
	server := ca.MustIssue()
	tlsDir.MustWrite(map[string][]byte{"tls.crt": server.ChainPEM, "tls.key": server.KeyPEM, "ca.crt": hotcerttest.BundlePEM(ca)})
	denyDir.MustWrite(map[string][]byte{"deny.list": []byte("# nothing revoked yet\n")})
	revoked, kept := ca.MustIssue(hotcerttest.WithCommonName("laptop-lost")), ca.MustIssue(hotcerttest.WithCommonName("laptop-kept"))
	keyDir := t.TempDir()
	for name, data := range map[string][]byte{"revoked.crt": revoked.ChainPEM, "revoked.key": revoked.KeyPEM, "kept.crt": kept.ChainPEM, "kept.key": kept.KeyPEM} {
		if err := os.WriteFile(filepath.Join(keyDir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	python := pythonHTTPServer(t)
	var logs testutil.LogBuffer
	common := []string{"--target", python, "--cert-file", filepath.Join(tlsDir.Dir(), "tls.crt"), "--key-file", filepath.Join(tlsDir.Dir(), "tls.key"),
		"--ca-file", filepath.Join(tlsDir.Dir(), "ca.crt"), "--allow-all", "--deny-list", filepath.Join(denyDir.Dir(), "deny.list"),
		"--poll-interval", "50ms", "--settle", "100ms", "--drain-grace", "1m"}
	httpAddr, httpMetrics := freeAddr(t), freeAddr(t)
	proxyRun(t, ctx, &logs, httpMetrics, append([]string{"server", "--mode", "http", "--listen", httpAddr}, common...)...)
	tcpAddr, tcpMetrics := freeAddr(t), freeAddr(t)
	proxyRun(t, ctx, &logs, tcpMetrics, append([]string{"server", "--mode", "tcp", "--listen", tcpAddr, "--component", "proxy_tcp"}, common...)...)
	before := proxyHealthz(t, httpMetrics, "")

	cfg := func(l *hotcerttest.Leaf) *tls.Config {
		return &tls.Config{RootCAs: hotcerttest.Pool(ca), ServerName: "localhost", Certificates: []tls.Certificate{l.TLSCertificate()}}
	}
	h2 := func(l *hotcerttest.Leaf) *http.Client {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg(l), ForceAttemptHTTP2: true}, Timeout: 10 * time.Second}
		t.Cleanup(c.CloseIdleConnections)
		return c
	}
	get := func(c *http.Client) (reused bool, err error) {
		var info httptrace.GotConnInfo
		req, _ := http.NewRequest(http.MethodGet, "https://"+httpAddr+"/hello.txt", nil)
		req = req.WithContext(httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { info = i }}))
		resp, err := c.Do(req)
		if err != nil {
			return false, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil && (string(b) != "hello from python\n" || resp.ProtoMajor != 2) {
			err = fmt.Errorf("HTTP/%d %s %q", resp.ProtoMajor, resp.Status, b)
		}
		return info.Reused, err
	}
	// tcp mode: a connection forwarded to python, which waits for its request.
	tcpConn := func(l *hotcerttest.Leaf) *tls.Conn {
		c, err := tls.Dial("tcp", tcpAddr, cfg(l))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	curl := func(name string) error {
		out, err := exec.Command("curl", "-sS", "--fail", "--http2", "--cacert", filepath.Join(tlsDir.Dir(), "ca.crt"),
			"--cert", filepath.Join(keyDir, name+".crt"), "--key", filepath.Join(keyDir, name+".key"),
			"https://"+httpAddr+"/hello.txt").CombinedOutput()
		if err == nil && string(out) != "hello from python\n" {
			err = fmt.Errorf("body %q", out)
		}
		return err
	}
	hRevoked, hKept := h2(revoked), h2(kept)
	for _, c := range []*http.Client{hRevoked, hKept} {
		if _, err := get(c); err != nil {
			t.Fatal(err)
		}
	}
	tRevoked, tKept := tcpConn(revoked), tcpConn(kept)
	if err := curl("revoked"); err != nil {
		t.Fatalf("curl before the revocation: %v", err)
	}
	// Wait until the tcp proxy has forwarded both connections (their handshakes
	// are done on the proxy's side too).
	testutil.WaitFor(t, "the tcp proxy's two connections", func() bool { return proxyHealthz(t, tcpMetrics, "").Connections == 2 })

	serial := hotcert.FormatSerial(revoked.Cert.SerialNumber)
	start := time.Now()
	denyDir.MustWrite(map[string][]byte{"deny.list": fmt.Appendf(nil, "# the lost laptop\nserial %s issuer %s\n", serial, hotcert.FingerprintOf(ca.Cert))})
	tRevoked.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := tRevoked.Read(make([]byte, 1)); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("the revoked client's tcp-mode connection: %v, want it closed", err)
	}
	t.Logf("tcp mode: the revoked client's connection ended %s after the list was written (poll 50ms, file events on)", time.Since(start))
	testutil.WaitFor(t, "two cut lines (http and tcp)", func() bool {
		return strings.Count(logs.String(), `"msg":"closing connection: peer certificate revoked"`) >= 2
	})
	if n := strings.Count(logs.String(), `"msg":"closing connection: peer certificate revoked"`); n != 2 {
		t.Errorf("%d cut lines, want 2 (one per proxy)", n)
	}
	if _, err := get(hRevoked); err == nil {
		t.Error("the revoked client's next request through the http proxy was served")
	}
	if err := curl("revoked"); err == nil {
		t.Error("curl with the revoked certificate got in")
	}
	if reused, err := get(hKept); err != nil || !reused {
		t.Errorf("the kept client: reused=%v err=%v, want its HTTP/2 connection kept", reused, err)
	}
	if err := curl("kept"); err != nil {
		t.Errorf("curl with the kept certificate: %v", err)
	}
	if _, err := io.WriteString(tKept, "GET /hello.txt HTTP/1.0\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(tKept); err != nil || !strings.HasSuffix(string(b), "\r\n\r\nhello from python\n") {
		t.Errorf("the kept client's tcp-mode connection: %q %v", b, err)
	}

	for _, m := range []string{httpMetrics, tcpMetrics} {
		dl := proxyHealthz(t, m, serial)
		if dl.Version == before.Version || dl.Generation != 2 || dl.Serials != 1 || dl.Policy != "keep-enforcing" {
			t.Errorf("%s deny_list: %+v, want the second list (before: %s)", m, dl, before.Version)
		}
		if dl.Serial == nil || !dl.Serial.Revoked || dl.Serial.Connections != 0 || dl.DeniedConnections != 0 {
			t.Errorf("%s deny_list for serial %s: %+v, want revoked with no connection left", m, serial, dl)
		}
		resp, err := http.Get("http://" + m + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := regexp.MustCompile(`hotcert_tls_deny_list_info\{component="proxy(_tcp)?_deny_list",version="` + dl.Version + `"\} 1`)
		if !want.Match(b) {
			t.Errorf("%s /metrics has no hotcert_tls_deny_list_info of version %s", m, dl.Version)
		}
		// What the census reads to prove that no connection of the revoked
		// certificate is left.
		if !regexp.MustCompile(`hotcert_tls_deny_list_denied_connections\{component="proxy(_tcp)?_deny_list"\} 0`).Match(b) {
			t.Errorf("%s /metrics has no hotcert_tls_deny_list_denied_connections of 0", m)
		}
	}
	out, _, err := run(ctx, "rotation", "status", "--revoked-serial", serial, "-o", "json",
		"--replica", httpAddr, "--status-url", "http://"+httpMetrics+"/healthz", "--replica", tcpAddr, "--status-url", "http://"+tcpMetrics+"/healthz")
	var rep struct {
		Done    bool   `json:"done"`
		Summary string `json:"summary"`
	}
	if jerr := json.Unmarshal([]byte(out), &rep); err != nil || jerr != nil || !rep.Done {
		t.Errorf("hotcert rotation status --revoked-serial against the proxies: %v %v %s", err, jerr, out)
	}
}

// A server-side deny list needs --ca-file: it revokes client certificates; a bad
// stale-CRL policy and a list that does not validate are one-line errors.
func TestProxyDenyListErrors(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	leaf := ca.MustIssue()
	files := []string{"--target", "127.0.0.1:1", "--cert-file", writeTemp(t, "tls.crt", leaf.ChainPEM), "--key-file", writeTemp(t, "tls.key", leaf.KeyPEM)}
	withCA := append([]string{"--ca-file", writeTemp(t, "ca.crt", hotcerttest.BundlePEM(ca)), "--allow-all"}, files...)
	list := writeTemp(t, "deny.list", []byte("\n"))
	for _, c := range []struct {
		args []string
		want string
	}{
		{append([]string{"--deny-list", list}, files...), "--deny-list and --crl-file need --ca-file"},
		{append([]string{"--deny-list", list, "--stale-crl-policy", "never"}, withCA...), `--stale-crl-policy "never": want keep-enforcing or refuse-all`},
		{append([]string{"--deny-list", writeTemp(t, "bad.list", []byte("serial zz issuer 00\n"))}, withCA...), "bad.list"},
	} {
		_, _, err := run(context.Background(), append([]string{"proxy", "server", "--listen", freeAddr(t)}, c.args...)...)
		requireOneLine(t, err, c.want)
	}
}

// TestProxyClientCRLCutsARevokedRemote: hotcert proxy client with --crl-file in
// front of two openssl s_server remotes. When a new CRL (signed by the CA of
// --ca-file) revokes one remote's certificate, the local program's connection to
// it ends, the proxy refuses to connect to it again, and the connection to the
// other remote stays up.
func TestProxyClientCRLCutsARevokedRemote(t *testing.T) {
	requireTool(t, "openssl")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ca := hotcerttest.MustNewCA()
	tlsDir := hotcerttest.MustNewAtomicWriter(filepath.Join(t.TempDir(), "tls"))
	crlDir := hotcerttest.MustNewAtomicWriter(filepath.Join(t.TempDir(), "crl"))
	client := ca.MustIssue(hotcerttest.WithCommonName("app"))
	tlsDir.MustWrite(map[string][]byte{"tls.crt": client.ChainPEM, "tls.key": client.KeyPEM, "ca.crt": hotcerttest.BundlePEM(ca)})
	now := time.Now()
	crlDir.MustWrite(map[string][]byte{"ca.crl": ca.MustCRL(1, now.Add(-time.Minute), now.Add(time.Hour))})
	revokedLeaf, keptLeaf := ca.MustIssue(), ca.MustIssue()
	var logs testutil.LogBuffer
	open := func(leaf *hotcerttest.Leaf) (local, metrics string) {
		local, metrics = freeAddr(t), freeAddr(t)
		proxyRun(t, ctx, &logs, metrics, "client", "--listen", local, "--target", opensslServer(t, leaf, ca),
			"--ca-file", filepath.Join(tlsDir.Dir(), "ca.crt"), "--cert-file", filepath.Join(tlsDir.Dir(), "tls.crt"),
			"--key-file", filepath.Join(tlsDir.Dir(), "tls.key"), "--crl-file", filepath.Join(crlDir.Dir(), "ca.crl"),
			"--server-name", "localhost", "--poll-interval", "50ms", "--settle", "100ms")
		return local, metrics
	}
	toRevoked, revokedMetrics := open(revokedLeaf)
	toKept, _ := open(keptLeaf)
	// A held connection to each: the proxy has connected to the remote once
	// /healthz counts it (openssl then waits for the request).
	hold := func(local, metrics string) net.Conn {
		c, err := net.Dial("tcp", local)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if metrics != "" {
			testutil.WaitFor(t, "the proxy's connection to the remote", func() bool { return proxyHealthz(t, metrics, "").Connections == 1 })
		}
		return c
	}
	held, kept := hold(toRevoked, revokedMetrics), hold(toKept, "")

	start := time.Now()
	crlDir.MustWrite(map[string][]byte{"ca.crl": ca.MustCRL(2, now.Add(-time.Minute), now.Add(time.Hour), revokedLeaf.Cert.SerialNumber)})
	held.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := held.Read(make([]byte, 1)); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("the connection to the revoked remote: %v, want it closed", err)
	}
	t.Logf("the connection to the revoked remote ended %s after the CRL was written", time.Since(start))
	testutil.WaitFor(t, "the cut line", func() bool {
		return strings.Contains(logs.String(), `"msg":"closing connection: peer certificate revoked"`)
	})
	if _, err := io.WriteString(kept, "GET / HTTP/1.0\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	kept.SetReadDeadline(time.Now().Add(10 * time.Second))
	if b, err := io.ReadAll(kept); err != nil || !strings.Contains(string(b), "Subject: CN=app") {
		t.Fatalf("the connection to the other remote: %v\n%s", err, b)
	}
	again := hold(toRevoked, "")
	io.WriteString(again, "GET / HTTP/1.0\r\n\r\n")
	again.SetReadDeadline(time.Now().Add(10 * time.Second))
	if b, _ := io.ReadAll(again); len(b) != 0 {
		t.Fatalf("the proxy reached the revoked remote again:\n%s", b)
	}
	testutil.WaitFor(t, "the refused handshake in the log", func() bool { return strings.Contains(logs.String(), "is revoked (CRL of") })
	serial := hotcert.FormatSerial(revokedLeaf.Cert.SerialNumber)
	if dl := proxyHealthz(t, revokedMetrics, serial); dl.Generation != 2 || dl.Serial == nil || !dl.Serial.Revoked || dl.Serial.Connections != 0 {
		t.Errorf("deny_list: %+v, want the second CRL, revoking %s, no connection of it left", dl, serial)
	}
}
