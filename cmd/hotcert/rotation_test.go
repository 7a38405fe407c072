package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hotcert/hotcert/cmd/hotcert/internal/rotation"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
)

// The rotation status command against the server and agent commands as an operator
// runs them: the JSON verdict, --wait giving up with the report and a non-zero exit,
// the text verdict, and bad input in one line.
func TestRotationStatusCommand(t *testing.T) {
	oldCA := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2025"))
	newCA := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2026"))
	tlsDir := hotcerttest.MustNewAtomicWriter(filepath.Join(t.TempDir(), "tls"))
	caDir := hotcerttest.MustNewAtomicWriter(filepath.Join(t.TempDir(), "ca"))
	leaf := oldCA.MustIssue()
	tlsDir.MustWrite(map[string][]byte{"tls.crt": leaf.ChainPEM, "tls.key": leaf.KeyPEM})
	caDir.MustWrite(map[string][]byte{"ca.crt": hotcerttest.BundlePEM(oldCA)})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	serverLog, agentLog := &testutil.LogBuffer{}, &testutil.LogBuffer{}
	serverDone := start(ctx, serverLog, "server", "--log-format", "json", "--listen", "127.0.0.1:0", "--metrics-bind-address", "127.0.0.1:0", "--replica", "cp-0",
		"--cert-file", filepath.Join(tlsDir.Dir(), "tls.crt"), "--key-file", filepath.Join(tlsDir.Dir(), "tls.key"))
	addr := logAttr(t, serverLog, "control plane listening", "addr")
	status := "http://" + logAttr(t, serverLog, "metrics and health listening", "addr") + "/healthz"
	oldFile, newFile := writeTemp(t, "old.crt", hotcerttest.BundlePEM(oldCA)), writeTemp(t, "new.crt", hotcerttest.BundlePEM(newCA))
	args := []string{"rotation", "status", "--replica", addr, "--status-url", status, "--server-name", "localhost",
		"--old-ca-file", oldFile, "--new-ca-file", newFile}

	// No agent yet: an empty fleet proves nothing (--min-agents defaults to 1).
	out, _, err := run(ctx, append(args, "-o", "json")...)
	var rep rotation.Report
	if err != nil || json.Unmarshal([]byte(out), &rep) != nil || rep.Next != rotation.StepAddNewCA ||
		!strings.Contains(rep.Summary, "0/0 connected agents trust CA-2026 (reported by 1 of 1 replica): fewer agents report than the 1 expected (0 connected;") {
		t.Fatalf("rotation status with no agent: %v\n%s", err, out)
	}

	agentDone := start(ctx, agentLog, "agent", "--log-format", "json", "--server", addr, "--server-name", "localhost", "--id", "agent-1",
		"--ca-file", filepath.Join(caDir.Dir(), "ca.crt"), "--heartbeat-interval", "50ms")
	logAttr(t, agentLog, "connected to control plane", "replica")

	out, _, err = run(ctx, append(args, "-o", "json")...)
	rep = rotation.Report{}
	if err != nil || json.Unmarshal([]byte(out), &rep) != nil || rep.Next != rotation.StepAddNewCA || rep.Agents.Total != 1 || rep.Replicas[0].Name != "cp-0" {
		t.Fatalf("rotation status -o json: %v\n%s", err, out)
	}

	// The same replica found in its Service's EndpointSlices, as kubectl prints them.
	host, port, _ := net.SplitHostPort(addr)
	slices := writeTemp(t, "endpointslices.json", fmt.Appendf(nil, `{"kind": "List", "items": [{"kind": "EndpointSlice",
		"ports": [{"name": "metrics", "port": 1}, {"name": "grpc", "port": %s}],
		"endpoints": [{"addresses": [%q], "conditions": {"ready": true}}, {"addresses": ["192.0.2.1"], "conditions": {"ready": false}}]}]}`, port, host))
	out, _, err = run(ctx, "rotation", "status", "--endpointslices", slices, "--port-name", "grpc", "--status-url", status, "--server-name", "localhost",
		"--old-ca-file", oldFile, "--new-ca-file", newFile, "-o", "json")
	rep = rotation.Report{}
	if err != nil || json.Unmarshal([]byte(out), &rep) != nil || len(rep.Replicas) != 1 || rep.Replicas[0].Name != "cp-0" || rep.Agents.Total != 1 {
		t.Fatalf("rotation status --endpointslices: %v\n%s", err, out)
	}
	_, _, err = run(ctx, "rotation", "status", "--endpointslices", slices, "--status-url", status, "--old-ca-file", oldFile, "--new-ca-file", newFile)
	requireOneLine(t, err, "name the gRPC one with --port-name")
	_, _, err = run(ctx, "rotation", "status", "--replica", addr, "--status-url", status, "--revoked-issuer", strings.Repeat("ab", 32))
	requireOneLine(t, err, "--revoked-issuer names the issuer of --revoked-serial: give both")
	_, _, err = run(ctx, "rotation", "status", "--replica", addr, "--status-url", status, "--revoked-serial", "0A", "--revoked-issuer", "9f86")
	requireOneLine(t, err, "want the SHA-256 fingerprint of the issuing CA certificate")

	out, _, err = run(ctx, append(args, "-o", "json", "--wait", "switch-server-cert", "--timeout", "200ms", "--interval", "20ms")...)
	rep = rotation.Report{}
	requireOneLine(t, err, "switch-server-cert step not safe after 200ms: not safe to switch the server certificate: agent agent-1 (on cp-0): its bundle lacks CA-2026")
	if json.Unmarshal([]byte(out), &rep) != nil || len(rep.Stragglers) != 1 || rep.Stragglers[0].Name != "agent-1" {
		t.Fatalf("rotation status --wait -o json that gives up: the report, got\n%s", out)
	}

	caDir.MustWrite(map[string][]byte{"ca.crt": hotcerttest.BundlePEM(newCA, oldCA)})
	out, _, err = run(ctx, append(args, "--wait", "switch-server-cert", "--timeout", "1m", "--interval", "20ms")...)
	if want := "step 1 done: 1/1 connected agents trust CA-2026 (reported by 1 of 1 replica); safe to switch the server certificate"; err != nil || !strings.HasPrefix(out, want) {
		t.Fatalf("rotation status --wait: %v\n%s\nwant it to start with %q", err, out, want)
	}

	// --wait complete gives up naming what the next step waits for, in one line and
	// in the JSON report; and below --min-agents, step 3 says why it is not safe
	// (its reason was once empty: "not safe to remove CA-2025: ").
	out, _, err = run(ctx, append(args, "-o", "json", "--wait", "complete", "--timeout", "200ms", "--interval", "20ms")...)
	requireOneLine(t, err, "rotation not complete after 200ms: step switch-server-cert not done: 0/1 replicas serve a leaf issued by CA-2026: replica cp-0 still serves a leaf issued by CA-2025")
	rep = rotation.Report{}
	if json.Unmarshal([]byte(out), &rep) != nil || rep.Next != rotation.StepSwitchServerCert {
		t.Fatalf("rotation status --wait complete -o json that gives up: the report, got\n%s", out)
	}
	out, _, err = run(ctx, append(args, "-o", "json", "--wait", "remove-old-ca", "--min-agents", "2", "--timeout", "200ms", "--interval", "20ms")...)
	requireOneLine(t, err, "remove-old-ca step not safe after 200ms: not safe to remove CA-2025: fewer agents report than the 2 expected (1 connected;")
	rep = rotation.Report{}
	if json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("rotation status --wait remove-old-ca -o json: %s", out)
	}
	for _, st := range rep.Steps {
		if strings.HasSuffix(strings.TrimSpace(st.Why), ":") || st.Why == "" {
			t.Fatalf("step %s gives no reason in the JSON: %q", st.Name, st.Why)
		}
	}

	_, _, err = run(ctx, append(args, "--wait", "switch")...)
	requireOneLine(t, err, `step "switch": want one of add-new-ca, switch-server-cert, remove-old-ca`)
	_, _, err = run(ctx, "rotation", "status", "--replica", addr, "--old-ca-file", "x", "--new-ca-file", "y")
	requireOneLine(t, err, "--status-url per replica, or --status-port")
	cancel()
	for _, d := range []chan error{agentDone, serverDone} {
		if err := <-d; err != nil {
			t.Fatal(err)
		}
	}
}
