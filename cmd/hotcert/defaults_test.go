package main

import (
	"bufio"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
)

// TestDefaultServerMovesTheAgentOntoARenewal: `hotcert server` and `hotcert agent`
// with nothing but the required flags move the agent onto a renewed server
// certificate by themselves (the drain window is on by default): a stream opened
// before the renewal does not keep the old certificate for as long as it lives.
func TestDefaultServerMovesTheAgentOntoARenewal(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	tlsDir := hotcerttest.MustNewAtomicWriter(filepath.Join(t.TempDir(), "tls"))
	caDir := hotcerttest.MustNewAtomicWriter(filepath.Join(t.TempDir(), "ca"))
	first := ca.MustIssue()
	tlsDir.MustWrite(map[string][]byte{"tls.crt": first.ChainPEM, "tls.key": first.KeyPEM})
	caDir.MustWrite(map[string][]byte{"ca.crt": hotcerttest.BundlePEM(ca)})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	serverLog, agentLog := &testutil.LogBuffer{}, &testutil.LogBuffer{}
	serverDone := start(ctx, serverLog, "server", "--log-format", "json", "--listen", "127.0.0.1:0",
		"--cert-file", filepath.Join(tlsDir.Dir(), "tls.crt"), "--key-file", filepath.Join(tlsDir.Dir(), "tls.key"))
	addr := logAttr(t, serverLog, "control plane listening", "addr")
	if line := findLine(serverLog.String(), "control plane listening"); line["drain_window"] != "10s" || line["trust_guard"] != true {
		t.Fatalf("the server does not say it drains and guards by default: %v", line)
	}
	agentDone := start(ctx, agentLog, "agent", "--log-format", "json", "--server", addr, "--server-name", "localhost",
		"--ca-file", filepath.Join(caDir.Dir(), "ca.crt"), "--id", "agent-1")
	if got := logAttr(t, agentLog, "connected to control plane", "server_serial"); got != hotcert.FormatSerial(first.Cert.SerialNumber) {
		t.Fatalf("agent connected to serial %s, want %s", got, hotcert.FormatSerial(first.Cert.SerialNumber))
	}

	renewed := ca.MustIssue()
	tlsDir.MustWrite(map[string][]byte{"tls.crt": renewed.ChainPEM, "tls.key": renewed.KeyPEM})
	// The agent is moved within the default drain window; the deadline only bounds
	// a hang (it is not what the test measures).
	want := hotcert.FormatSerial(renewed.Cert.SerialNumber)
	deadline := time.Now().Add(defaultDrainWindow + 30*time.Second)
	for !connectedTo(agentLog.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("the agent stayed on serial %s after the renewal to %s:\n%s", hotcert.FormatSerial(first.Cert.SerialNumber), want, agentLog)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(agentLog.String(), `"msg":"control plane asked to reconnect"`) || strings.Contains(agentLog.String(), `"level":"WARN"`) {
		t.Fatalf("the agent was not moved by a clean drain:\n%s", agentLog)
	}
	cancel()
	for _, done := range []chan error{serverDone, agentDone} {
		if err := <-done; err != nil {
			t.Errorf("stop: %v", err)
		}
	}
}

// connectedTo reports whether logs hold a "connected to control plane" line whose
// server serial is serial.
func connectedTo(logs, serial string) bool {
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == "connected to control plane" && m["server_serial"] == serial {
			return true
		}
	}
	return false
}
