package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/controlplane"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/inspect"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/source/file"
)

// run executes the hotcert command line in-process and returns stdout, stderr and
// the error main would print.
func run(ctx context.Context, args ...string) (string, string, error) {
	var out, errb bytes.Buffer
	root := newRootCommand(&out, &errb)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	return out.String(), errb.String(), err
}

func writeTemp(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func requireOneLine(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want an error containing %q, got none", want)
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, want) {
		t.Fatalf("error %q: want one line containing %q", msg, want)
	}
}

func TestCheckCommand(t *testing.T) {
	ctx := context.Background()
	ca := hotcerttest.MustNewCA()
	leaf := ca.MustIssue()
	crt, key := writeTemp(t, "tls.crt", leaf.ChainPEM), writeTemp(t, "tls.key", leaf.KeyPEM)
	bundle := writeTemp(t, "ca.crt", hotcerttest.BundlePEM(ca, hotcerttest.MustNewCA()))

	out, _, err := run(ctx, "check", "--cert-file", crt, "--key-file", key, "--ca-file", bundle)
	if err != nil || !strings.Contains(out, "OK: the reloader would load these files") || !strings.Contains(out, hotcert.FormatSerial(leaf.Cert.SerialNumber)) {
		t.Fatalf("check of good files: err %v, output:\n%s", err, out)
	}
	out, _, err = run(ctx, "check", "--cert-file", crt, "--key-file", key, "--ca-file", bundle, "-o", "json")
	var rep inspect.FilesReport
	if err != nil || json.Unmarshal([]byte(out), &rep) != nil || !rep.OK || len(rep.CABundle) != 2 || !rep.ChainsToBundle.OK ||
		rep.Certificate.Serial != hotcert.FormatSerial(leaf.Cert.SerialNumber) {
		t.Fatalf("check -o json: err %v, output:\n%s", err, out)
	}
	if _, _, err := run(ctx, "check", "--ca-file", bundle); err != nil {
		t.Fatalf("check of a bundle alone: %v", err)
	}

	// Bad input: a one-line reason and a non-zero exit; JSON still describes it.
	otherKey := writeTemp(t, "other.key", ca.MustIssue().KeyPEM)
	out, _, err = run(ctx, "check", "--cert-file", crt, "--key-file", otherKey, "-o", "json")
	requireOneLine(t, err, "does not match")
	if json.Unmarshal([]byte(out), &rep) != nil || rep.OK || rep.Reason != "key_mismatch" || rep.Input != otherKey {
		t.Fatalf("check -o json of a mismatched pair:\n%s", out)
	}
	truncated := writeTemp(t, "truncated.crt", hotcerttest.Truncate(hotcerttest.BundlePEM(ca, hotcerttest.MustNewCA())))
	out, _, err = run(ctx, "check", "--ca-file", truncated)
	requireOneLine(t, err, "PEM block 2")
	if !strings.Contains(out, "INVALID (pem)") {
		t.Fatalf("text output of a truncated bundle:\n%s", out)
	}
	for _, args := range [][]string{
		{"check"},
		{"check", "--cert-file", crt},
		{"check", "--cert-file", crt, "--key-file", key, "-o", "yaml"},
		{"check", "--ca-file", filepath.Join(t.TempDir(), "missing")},
		{"check", "--ca-file", bundle, "--log-format", "xml"},
	} {
		_, _, err := run(ctx, args...)
		requireOneLine(t, err, "")
	}
}

func TestInspectCommand(t *testing.T) {
	ctx := context.Background()
	ca, other := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	leaf := ca.MustIssue()
	addr := startServer(t, leaf)
	good := writeTemp(t, "ca.crt", hotcerttest.BundlePEM(other, ca))
	wrong := writeTemp(t, "other.crt", hotcerttest.BundlePEM(other))

	out, _, err := run(ctx, "inspect", addr, "--server-name", "localhost", "--ca-file", good, "-o", "json")
	var rep inspect.RemoteReport
	if err != nil || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("inspect -o json: err %v, output:\n%s", err, out)
	}
	if rep.Certificate.Serial != hotcert.FormatSerial(leaf.Cert.SerialNumber) || rep.ALPN != "h2" || rep.SNI != "localhost" ||
		!rep.Bundle.Verified || rep.Bundle.CAs[0].Chain.OK || !rep.Bundle.CAs[1].Chain.OK || !rep.Hostname.OK {
		t.Fatalf("inspect report: %+v", rep)
	}
	out, _, err = run(ctx, "inspect", addr, "--ca-file", good)
	if err != nil || !strings.Contains(out, "VERIFIED") || !strings.Contains(out, "alpn:") || !strings.Contains(out, rep.Certificate.SHA256Colon()) {
		t.Fatalf("inspect text: err %v:\n%s", err, out)
	}

	// A bundle that does not verify the replica: the report, then a non-zero exit.
	out, _, err = run(ctx, "inspect", addr, "--ca-file", wrong)
	requireOneLine(t, err, "would refuse")
	if !strings.Contains(out, "NOT VERIFIED") || !strings.Contains(out, "unknown authority") {
		t.Fatalf("inspect with the wrong CA:\n%s", out)
	}
	// A name the certificate does not carry.
	_, _, err = run(ctx, "inspect", addr, "--server-name", "cp.example.com", "--ca-file", good)
	requireOneLine(t, err, "does not name cp.example.com")

	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := ln.Addr().String()
	ln.Close()
	for _, args := range [][]string{{"inspect"}, {"inspect", "no-port"}, {"inspect", closed}, {"inspect", addr, "-o", "yaml"}} {
		_, _, err := run(ctx, args...)
		requireOneLine(t, err, "")
	}
}

// startServer runs a control plane replica in-process and returns its address.
func startServer(t *testing.T, leaf *hotcerttest.Leaf) string {
	t.Helper()
	addr, _ := startServerOn(t, writeTemp(t, "tls.crt", leaf.ChainPEM), writeTemp(t, "tls.key", leaf.KeyPEM))
	return addr
}

// startServerOn runs a control plane replica in-process on the given files, which
// it follows, and returns its address and the server.
func startServerOn(t *testing.T, crt, key string) (string, *controlplane.Server) {
	t.Helper()
	src, err := file.New(file.WithKeyPair(crt, key))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := controlplane.New(controlplane.Config{TLS: src})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	return ln.Addr().String(), srv
}

// The server and agent commands, wired as an operator runs them: the agent
// connects, /healthz and /metrics answer, a renewal is served, a bad pair is
// logged and counted once, and both stop on cancel.
func TestServerAndAgentCommands(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	tlsDir := hotcerttest.MustNewAtomicWriter(filepath.Join(t.TempDir(), "tls"))
	caDir := hotcerttest.MustNewAtomicWriter(filepath.Join(t.TempDir(), "ca"))
	first := ca.MustIssue()
	tlsDir.MustWrite(map[string][]byte{"tls.crt": first.ChainPEM, "tls.key": first.KeyPEM})
	caDir.MustWrite(map[string][]byte{"ca.crt": hotcerttest.BundlePEM(ca)})
	crt, key := filepath.Join(tlsDir.Dir(), "tls.crt"), filepath.Join(tlsDir.Dir(), "tls.key")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	serverLog, agentLog := &testutil.LogBuffer{}, &testutil.LogBuffer{}
	serverDone := start(ctx, serverLog, "server", "--log-format", "json", "--listen", "127.0.0.1:0", "--metrics-bind-address", "127.0.0.1:0",
		"--cert-file", crt, "--key-file", key, "--settle", "50ms", "--poll-interval", "100ms", "--replica", "cp-test")
	addr := logAttr(t, serverLog, "control plane listening", "addr")
	metricsAddr := logAttr(t, serverLog, "metrics and health listening", "addr")
	agentDone := start(ctx, agentLog, "agent", "--log-format", "json", "--server", addr, "--server-name", "localhost",
		"--ca-file", filepath.Join(caDir.Dir(), "ca.crt"), "--heartbeat-interval", "100ms", "--metrics-bind-address", "127.0.0.1:0", "--id", "agent-1")
	if got := logAttr(t, agentLog, "connected to control plane", "server_serial"); got != hotcert.FormatSerial(first.Cert.SerialNumber) {
		t.Fatalf("agent connected to serial %s, want %s", got, hotcert.FormatSerial(first.Cert.SerialNumber))
	}
	agentMetrics := logAttr(t, agentLog, "metrics and health listening", "addr")

	var st controlplane.Status
	if code := getJSON(t, "http://"+metricsAddr+"/healthz", &st); code != 200 || !st.Healthy || st.Replica != "cp-test" || st.Stats.ConnectedAgents != 1 {
		t.Fatalf("server /healthz: %d %+v", code, st)
	}
	requireMetric(t, metricsAddr, `hotcert_tls_reload_failures_total{component="agent_grpc"} 0`)
	requireMetric(t, metricsAddr, `hotcert_controlplane_connected_agents 1`)
	requireMetric(t, agentMetrics, `hotcert_agent_connected 1`)
	requireMetric(t, agentMetrics, `hotcert_tls_ca_bundle_certificates{component="agent_ca"} 1`)
	var ast map[string]any
	if code := getJSON(t, "http://"+agentMetrics+"/healthz", &ast); code != 200 || ast["agent"] != "agent-1" {
		t.Fatalf("agent /healthz: %d %v", code, ast)
	}

	// Renewal: the next handshake serves the new certificate.
	renewed := ca.MustIssue()
	tlsDir.MustWrite(map[string][]byte{"tls.crt": renewed.ChainPEM, "tls.key": renewed.KeyPEM})
	testutil.WaitFor(t, "the renewal to be served", func() bool {
		rep, err := inspect.Remote(ctx, inspect.RemoteOptions{Address: addr})
		return err == nil && rep.Certificate.Serial == hotcert.FormatSerial(renewed.Cert.SerialNumber)
	})
	// A bad pair: one line, one count, last good kept.
	tlsDir.MustWrite(map[string][]byte{"tls.crt": ca.MustIssue().ChainPEM, "tls.key": renewed.KeyPEM})
	requireMetricEventually(t, metricsAddr, `hotcert_tls_reload_failures_total{component="agent_grpc"} 1`)
	if n := strings.Count(serverLog.String(), `"msg":"TLS certificate reload failed"`); n != 1 {
		t.Fatalf("%d failure lines, want 1:\n%s", n, serverLog)
	}
	line := findLine(serverLog.String(), "TLS certificate reload failed")
	if line["component"] != "agent_grpc" || !strings.Contains(line["source"].(string), crt) || !strings.Contains(line["source"].(string), key) {
		t.Fatalf("failure line %v: want component=agent_grpc and both file paths", line)
	}
	if code := getJSON(t, "http://"+metricsAddr+"/healthz", &st); code != 200 || st.LastError == "" || st.Serving.Serial != hotcert.FormatSerial(renewed.Cert.SerialNumber) {
		t.Fatalf("server /healthz after a bad pair: %d %+v", code, st)
	}

	cancel()
	for name, done := range map[string]chan error{"server": serverDone, "agent": agentDone} {
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s returned %v on cancel, want nil", name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s did not stop on cancel", name)
		}
	}
	if hotcerttest.ContainsKeyMaterial(serverLog.String(), first, renewed) {
		t.Fatal("server log contains key material")
	}
}

func TestServerAndAgentStartupErrors(t *testing.T) {
	ctx := context.Background()
	ca := hotcerttest.MustNewCA()
	leaf := ca.MustIssue()
	crt, key := writeTemp(t, "tls.crt", leaf.ChainPEM), writeTemp(t, "tls.key", leaf.KeyPEM)
	missing := filepath.Join(t.TempDir(), "missing.crt")
	empty := writeTemp(t, "empty.crt", nil)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"server", "--cert-file", missing, "--key-file", key}, missing},
		{[]string{"server", "--cert-file", crt, "--key-file", writeTemp(t, "other.key", ca.MustIssue().KeyPEM)}, "does not match"},
		{[]string{"server", "--cert-file", crt}, "--key-file"},
		{[]string{"server", "--cert-file", crt, "--key-file", key, "--ca-file", empty}, empty},
		{[]string{"server", "--cert-file", crt, "--key-file", key, "--listen", "256.0.0.1:1"}, "--listen"},
		{[]string{"agent", "--server", "127.0.0.1:1", "--ca-file", missing}, missing},
		{[]string{"agent", "--server", "127.0.0.1:1", "--ca-file", empty}, empty},
		{[]string{"agent", "--ca-file", crt}, "--server"},
		{[]string{"agent", "--server", "127.0.0.1:1"}, "--ca-file"},
		{[]string{"agent", "--server", "127.0.0.1:1", "--ca-file", writeTemp(t, "ca.crt", hotcerttest.BundlePEM(ca)), "--cert-file", crt}, "--key-file"},
		{[]string{"agent", "--server", "localhost", "--ca-file", crt}, `--server "localhost": want host:port`},
		{[]string{"server", "--cert-file", missing, "--key-file", key}, "--cert-file " + missing + ": does not exist"},
		{[]string{"agent", "--server", "127.0.0.1:1", "--ca-file", empty}, "--ca-file " + empty + ": "},
		{[]string{"check", "--cert-file", crt}, "--cert-file and --key-file go together"},
	} {
		_, _, err := run(ctx, tc.args...)
		requireOneLine(t, err, tc.want)
		requireUserTerms(t, err)
	}
}

func TestReferenceCommandsHaveHelp(t *testing.T) {
	for _, name := range []string{"server", "agent", "inspect", "check"} {
		out, _, err := run(context.Background(), name, "--help")
		if err != nil || !strings.Contains(out, "Usage:") || !strings.Contains(out, "--log-format") {
			t.Errorf("%s --help: err %v:\n%s", name, err, out)
		}
	}
}

func start(ctx context.Context, log io.Writer, args ...string) chan error {
	done := make(chan error, 1)
	go func() {
		root := newRootCommand(io.Discard, log)
		root.SetArgs(args)
		done <- root.ExecuteContext(ctx)
	}()
	return done
}

// logAttr waits for a JSON log line with message msg and returns its attribute key.
func logAttr(t *testing.T, log *testutil.LogBuffer, msg, key string) string {
	t.Helper()
	var v string
	testutil.WaitFor(t, "log line "+msg, func() bool {
		if line := findLine(log.String(), msg); line != nil {
			v, _ = line[key].(string)
		}
		return v != ""
	})
	return v
}

func findLine(logs, msg string) map[string]any {
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == msg {
			return m
		}
	}
	return nil
}

func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	return resp.StatusCode
}

func metricsText(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func requireMetric(t *testing.T, addr, line string) {
	t.Helper()
	if text := metricsText(t, addr); !strings.Contains(text, line+"\n") {
		t.Fatalf("/metrics of %s lacks %q", addr, line)
	}
}

func requireMetricEventually(t *testing.T, addr, line string) {
	t.Helper()
	testutil.WaitFor(t, line, func() bool { return strings.Contains(metricsText(t, addr), line+"\n") })
}

// requireUserTerms fails when a message names the layers it passed through
// (package prefixes, the reloader's "initial load") instead of what and where.
func requireUserTerms(t *testing.T, err error) {
	t.Helper()
	for _, layer := range []string{"controlplane:", "agent:", "file:", "hotcert:", "initial load", "jwtkeys:"} {
		if strings.Contains(err.Error(), layer) {
			t.Errorf("error %q names an internal layer (%q): say what and where in the user's terms", err, layer)
		}
	}
}
