package grpccreds_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/grpccreds"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/source/file"
	"github.com/hotcert/hotcert/tlsconfig"
)

// controlPlane is a gRPC server whose certificate, key (and client CA bundle) are
// files in a kubelet-style projected directory, followed by a started Reloader.
type controlPlane struct {
	*testServer
	w        *hotcerttest.AtomicWriter
	reloader *hotcert.Reloader
}

func startControlPlane(t *testing.T, leaf *hotcerttest.Leaf, clientCAs []*hotcerttest.CA, opts ...grpc.ServerOption) *controlPlane {
	t.Helper()
	dir := t.TempDir()
	w := hotcerttest.MustNewAtomicWriter(dir)
	payload := map[string][]byte{"tls.crt": leaf.ChainPEM, "tls.key": leaf.KeyPEM}
	fopts := []file.Option{file.WithKeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))}
	if clientCAs != nil {
		payload["ca.crt"] = hotcerttest.BundlePEM(clientCAs...)
		fopts = append(fopts, file.WithCA(filepath.Join(dir, "ca.crt")))
	}
	w.MustWrite(payload)
	src, err := file.New(fopts...)
	if err != nil {
		t.Fatal(err)
	}
	r, err := hotcert.New(context.Background(), src, hotcert.WithComponent("agent_grpc"),
		hotcert.WithSettle(10*time.Millisecond), hotcert.WithPollInterval(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = r.Start(context.Background()) }()
	t.Cleanup(func() { r.Close() })
	creds := grpccreds.NewServer(r)
	if clientCAs != nil {
		creds = grpccreds.NewMTLSServer(r)
	}
	return &controlPlane{testServer: startServer(t, creds, opts...), w: w, reloader: r}
}

// rotate writes a new certificate and waits until the reloader serves it.
func (cp *controlPlane) rotate(t *testing.T, leaf *hotcerttest.Leaf, clientCAs ...*hotcerttest.CA) {
	t.Helper()
	payload := map[string][]byte{"tls.crt": leaf.ChainPEM, "tls.key": leaf.KeyPEM}
	if clientCAs != nil {
		payload["ca.crt"] = hotcerttest.BundlePEM(clientCAs...)
	}
	cp.w.MustWrite(payload)
	waitUntil(t, "the server to load the new certificate", func() bool {
		return cp.reloader.Current().Leaf().SerialNumber.Cmp(leaf.Cert.SerialNumber) == 0
	})
}

// agentCA is the agent's CA bundle file, re-read on every dial by a Reloader that
// is never started (re-read per dial: no watcher needed).
type agentCA struct {
	w        *hotcerttest.AtomicWriter
	reloader *hotcert.Reloader
	logs     *testutil.LogBuffer
}

func newAgentCA(t *testing.T, cas ...*hotcerttest.CA) *agentCA {
	t.Helper()
	dir := t.TempDir()
	w := hotcerttest.MustNewAtomicWriter(dir)
	w.MustWrite(map[string][]byte{"ca.crt": hotcerttest.BundlePEM(cas...)})
	src, err := file.New(file.WithCA(filepath.Join(dir, "ca.crt")))
	if err != nil {
		t.Fatal(err)
	}
	logs := &testutil.LogBuffer{}
	r, err := hotcert.New(context.Background(), src, hotcert.WithSettle(0), hotcert.WithPollInterval(0),
		hotcert.WithLogger(slog.New(slog.NewTextHandler(logs, nil))),
		hotcert.WithLogMessages("", "", "agent TLS CA bundle reload failed"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return &agentCA{w: w, reloader: r, logs: logs}
}

func (a *agentCA) write(data []byte) { a.w.MustWrite(map[string][]byte{"ca.crt": data}) }

func (a *agentCA) creds(opts ...tlsconfig.Option) credentials.TransportCredentials {
	return grpccreds.NewClient(a.reloader, append([]tlsconfig.Option{tlsconfig.WithReloadOnDial(a.reloader)}, opts...)...)
}

// TestLongLivedStreamSurvivesRotation: a stream opened before a rotation stays up
// on its connection and keeps the certificate that connection was opened with; new
// connections get the new certificate.
func TestLongLivedStreamSurvivesRotation(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	oldLeaf, newLeaf := ca.MustIssue(), ca.MustIssue()
	cp := startControlPlane(t, oldLeaf, nil)
	agent := newAgentCA(t, ca)
	cc := dial(t, cp.addr("127.0.0.1"), agent.creds())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := cc.NewStream(ctx, &echoDesc.Streams[0], streamMethod)
	if err != nil {
		t.Fatal(err)
	}
	echo := func(msg string) {
		t.Helper()
		if err := stream.SendMsg(wrapperspb.String(msg)); err != nil {
			t.Fatalf("send %q: %v", msg, err)
		}
		got := new(wrapperspb.StringValue)
		if err := stream.RecvMsg(got); err != nil || got.GetValue() != msg {
			t.Fatalf("echo %q: %q, %v", msg, got.GetValue(), err)
		}
	}
	echo("before")
	p, _ := peer.FromContext(stream.Context())
	if s := serialOf(p); s == nil || s.Cmp(oldLeaf.Cert.SerialNumber) != 0 {
		t.Fatalf("stream opened with serial %v, want %x", s, oldLeaf.Cert.SerialNumber)
	}

	cp.rotate(t, newLeaf)

	echo("after")
	p, _ = peer.FromContext(stream.Context())
	if s := serialOf(p); s.Cmp(oldLeaf.Cert.SerialNumber) != 0 {
		t.Fatalf("the established stream's certificate changed to %x", s)
	}
	if n := cp.lis.count(); n != 1 {
		t.Fatalf("the server accepted %d connections, want the stream's one", n)
	}

	// A new connection sees the new certificate, by IP and by name.
	for _, host := range []string{"127.0.0.1", "localhost"} {
		serial, _, err := who(ctx, dial(t, cp.addr(host), agent.creds()))
		if err != nil {
			t.Fatalf("%s: %v", host, err)
		}
		if serial.Cmp(newLeaf.Cert.SerialNumber) != 0 {
			t.Fatalf("%s: new connection got serial %x, want %x", host, serial, newLeaf.Cert.SerialNumber)
		}
	}
	echo("still up")
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
}

// TestAgentCARotation walks the three-step CA rotation with an agent that
// re-reads its bundle on every reconnect, a broken bundle in between, and a
// channel that reconnects after the server drops its connections.
func TestAgentCARotation(t *testing.T) {
	oldCA, newCA := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	cp := startControlPlane(t, oldCA.MustIssue(), nil)
	agent := newAgentCA(t, oldCA)
	cc := dial(t, cp.addr("127.0.0.1"), agent.creds())
	ctx := context.Background()

	expectServer := func(step string, want *hotcerttest.Leaf) {
		t.Helper()
		dropAndWait(t, cp.testServer, cc) // the agent reconnects on its next RPC
		serial, _, err := who(ctx, cc)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if serial.Cmp(want.Cert.SerialNumber) != 0 {
			t.Fatalf("%s: connected to serial %x, want %x", step, serial, want.Cert.SerialNumber)
		}
	}
	if _, _, err := who(ctx, cc); err != nil {
		t.Fatal(err)
	}

	// Step 1: the bundle holds old and new CA.
	agent.write(hotcerttest.BundlePEM(oldCA, newCA))
	// Step 2: the server switches to a certificate of the new CA.
	next := newCA.MustIssue()
	cp.rotate(t, next)
	expectServer("after step 2", next)

	// A half-written bundle: the agent keeps the last good one and logs once.
	agent.write(hotcerttest.Truncate(hotcerttest.BundlePEM(newCA, oldCA)))
	expectServer("with a broken bundle", next)
	expectServer("with a broken bundle, again", next)
	if n := strings.Count(agent.logs.String(), "agent TLS CA bundle reload failed"); n != 1 {
		t.Fatalf("broken bundle logged %d times, want 1:\n%s", n, agent.logs.String())
	}
	if !strings.Contains(agent.logs.String(), "ca.crt") {
		t.Fatalf("the failure log does not name the file:\n%s", agent.logs.String())
	}

	// Step 3: the old CA leaves the bundle.
	agent.write(hotcerttest.BundlePEM(newCA))
	renewed := newCA.MustIssue()
	cp.rotate(t, renewed)
	expectServer("after step 3", renewed)

	// A server back on the removed CA is refused.
	cp.rotate(t, oldCA.MustIssue())
	dropAndWait(t, cp.testServer, cc)
	shortCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, _, err := who(shortCtx, cc, grpc.WaitForReady(false))
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("server on a removed CA: %v, want Unavailable with a certificate error", err)
	}
}

// TestALPN: the reloading server negotiates h2 (trap 2), by IP (no SNI) and by
// name, and serves the current certificate.
func TestALPN(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	leaf := ca.MustIssue()
	cp := startControlPlane(t, ca.MustIssue(), nil)
	cp.rotate(t, leaf)
	for _, host := range []string{"127.0.0.1", "localhost"} {
		conn, err := tls.Dial("tcp", cp.addr(host), &tls.Config{RootCAs: hotcerttest.Pool(ca), NextProtos: []string{"h2"}})
		if err != nil {
			t.Fatalf("%s: %v", host, err)
		}
		st := conn.ConnectionState()
		conn.Close()
		if st.NegotiatedProtocol != "h2" {
			t.Fatalf("%s: negotiated %q, want h2", host, st.NegotiatedProtocol)
		}
		if st.PeerCertificates[0].SerialNumber.Cmp(leaf.Cert.SerialNumber) != 0 {
			t.Fatalf("%s: served serial %x, want %x", host, st.PeerCertificates[0].SerialNumber, leaf.Cert.SerialNumber)
		}
	}

	// The same check as the runbook: openssl s_client -alpn h2.
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Fatal("openssl is required for the runbook's s_client -alpn h2 check (.ci/run installs it)")
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, hotcerttest.BundlePEM(ca), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, openssl, "s_client", "-connect", cp.addr("127.0.0.1"), "-alpn", "h2",
		"-CAfile", caFile, "-verify_return_error", "-verify_ip", "127.0.0.1")
	cmd.Stdin = bytes.NewReader(nil)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("openssl s_client: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("ALPN protocol: h2")) || !bytes.Contains(out, []byte("Verify return code: 0 (ok)")) {
		t.Fatalf("openssl s_client did not negotiate h2 with a verified certificate:\n%s", out)
	}
}

// tokenCreds is a per-RPC credential that requires transport security (trap 8).
type tokenCreds string

func (c tokenCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(c)}, nil
}

func (tokenCreds) RequireTransportSecurity() bool { return true }

func TestPerRPCCredentialsRequiringTransportSecurity(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	srvID := hotcert.NewStore(hotcertMaterial(t, ca.MustIssue(), ca))
	var seen sync.Map
	check := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		p, _ := peer.FromContext(ctx)
		ti, ok := p.AuthInfo.(credentials.TLSInfo)
		if !ok || ti.SecurityLevel != credentials.PrivacyAndIntegrity {
			return nil, status.Error(codes.Unauthenticated, "not over TLS")
		}
		seen.Store("auth", strings.Join(md.Get("authorization"), ","))
		return h(ctx, req)
	}
	srv := startServer(t, grpccreds.NewMTLSServer(srvID), grpc.UnaryInterceptor(check))
	agentLeaf := ca.MustIssue(hotcerttest.WithCommonName("agent-7"))
	creds := grpccreds.NewClient(hotcert.NewStore(hotcertMaterial(t, agentLeaf, ca)))
	cc := dial(t, srv.addr("localhost"), creds, grpc.WithPerRPCCredentials(tokenCreds("s3cret")))
	_, name, err := who(context.Background(), cc)
	if err != nil {
		t.Fatal(err)
	}
	if name != "agent-7" {
		t.Fatalf("server saw client %q, want agent-7", name)
	}
	if v, _ := seen.Load("auth"); v != "Bearer s3cret" {
		t.Fatalf("server got authorization %q", v)
	}
}

func TestClientCredentialsInfoCloneOverride(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	store := hotcert.NewStore(hotcertMaterial(t, ca.MustIssue(), ca))
	c := grpccreds.NewClient(store)
	if info := c.Info(); info.SecurityProtocol != "tls" || info.ServerName != "" {
		t.Fatalf("Info = %+v", info)
	}
	if got := grpccreds.NewClient(store, tlsconfig.WithServerName("cp.example")).Info().ServerName; got != "cp.example" {
		t.Fatalf("WithServerName: Info().ServerName = %q", got)
	}
	clone := c.Clone()
	if err := clone.OverrideServerName("localhost"); err != nil { //nolint:staticcheck // testing the deprecated method
		t.Fatal(err)
	}
	if c.Info().ServerName != "" || clone.Info().ServerName != "localhost" {
		t.Fatal("OverrideServerName on a clone leaked into the original")
	}
	if _, _, err := c.ServerHandshake(nil); err == nil {
		t.Fatal("client credentials accepted a server handshake")
	}

	// A certificate with only the DNS name localhost, dialed by IP: the override
	// becomes the authority the certificate must match.
	srv := startServer(t, grpccreds.NewServer(hotcert.NewStore(hotcertMaterial(t, ca.MustIssue(hotcerttest.WithIPAddresses()), ca))))
	if _, _, err := who(context.Background(), dial(t, srv.addr("127.0.0.1"), clone)); err != nil {
		t.Fatalf("with the override: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, _, err := who(ctx, dial(t, srv.addr("127.0.0.1"), c), grpc.WaitForReady(false)); status.Code(err) != codes.Unavailable {
		t.Fatalf("without the override, an IP the certificate lacks: %v, want Unavailable", err)
	}
}

func hotcertMaterial(t testing.TB, leaf *hotcerttest.Leaf, cas ...*hotcerttest.CA) *hotcert.Material {
	t.Helper()
	m, err := hotcert.Validate(hotcert.Content{
		Cert: hotcert.Input{Name: "tls.crt", Data: leaf.ChainPEM},
		Key:  hotcert.Input{Name: "tls.key", Data: leaf.KeyPEM},
		CA:   hotcert.Input{Name: "ca.crt", Data: hotcerttest.BundlePEM(cas...)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}
