package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
)

var (
	hexFingerprint   = regexp.MustCompile(`^[0-9a-f]{64}$`)
	hexPrefix        = regexp.MustCompile(`^[0-9a-f]{16}$`)
	otherFingerprint = regexp.MustCompile(`(?i)^([0-9a-f]{2}:){31}[0-9a-f]{2}$|^[0-9a-f]{64}$`)
	// metricFingerprint finds the sha256 label values of the *_info series.
	metricFingerprint = regexp.MustCompile(`sha256="([^"]*)"`)
)

// fingerprints returns every string of a JSON document that is a SHA-256
// fingerprint in any format (and whether each key named like one holds one).
func fingerprints(t *testing.T, what string, doc []byte) []string {
	t.Helper()
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatalf("%s: %v: %s", what, err, doc)
	}
	var out []string
	var walk func(key string, v any)
	walk = func(key string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				walk(k, e)
			}
		case []any:
			for _, e := range v {
				walk(key, e)
			}
		case string:
			switch {
			case strings.HasSuffix(key, "sha256_prefixes"): // the reloader's line: 16-digit prefixes, comma-separated
				for _, p := range strings.Split(v, ",") {
					if !hexPrefix.MatchString(p) {
						out = append(out, p)
					}
				}
			case otherFingerprint.MatchString(v) || strings.Contains(key, "sha256"):
				out = append(out, v)
			}
		}
	}
	walk("", v)
	return out
}

// TestFingerprintsHaveOneFormat: every fingerprint in hotcert's machine output
// (the server's and the agent's /healthz, inspect and check -o json, JSON logs,
// metric labels) is lower-case hex; only the text for people uses openssl's
// colon format.
func TestFingerprintsHaveOneFormat(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	leaf := ca.MustIssue()
	crt, key := writeTemp(t, "tls.crt", leaf.ChainPEM), writeTemp(t, "tls.key", leaf.KeyPEM)
	bundle := writeTemp(t, "ca.crt", hotcerttest.BundlePEM(ca))
	ctx, cancel := context.WithCancel(context.Background())
	serverLog, agentLog := &testutil.LogBuffer{}, &testutil.LogBuffer{}
	serverDone := start(ctx, serverLog, "server", "--log-format", "json", "--listen", "127.0.0.1:0", "--metrics-bind-address", "127.0.0.1:0",
		"--cert-file", crt, "--key-file", key, "--replica", "cp-fp")
	addr := logAttr(t, serverLog, "control plane listening", "addr")
	serverMetrics := logAttr(t, serverLog, "metrics and health listening", "addr")
	agentDone := start(ctx, agentLog, "agent", "--log-format", "json", "--server", addr, "--server-name", "localhost",
		"--ca-file", bundle, "--heartbeat-interval", "100ms", "--metrics-bind-address", "127.0.0.1:0", "--id", "agent-fp")
	logAttr(t, agentLog, "connected to control plane", "server_sha256")
	agentMetrics := logAttr(t, agentLog, "metrics and health listening", "addr")
	// The fleet view holds the agent's report once it has heartbeaten.
	testutil.WaitFor(t, "the agent's trust report", func() bool {
		return strings.Contains(get(t, "http://"+serverMetrics+"/healthz"), `"agent_list"`)
	})

	docs := map[string][]byte{
		"server /healthz": []byte(get(t, "http://"+serverMetrics+"/healthz")),
		"agent /healthz":  []byte(get(t, "http://"+agentMetrics+"/healthz")),
	}
	for name, args := range map[string][]string{
		"inspect -o json": {"inspect", addr, "--server-name", "localhost", "--ca-file", bundle, "-o", "json"},
		"check -o json":   {"check", "--cert-file", crt, "--key-file", key, "--ca-file", bundle, "-o", "json"},
	} {
		out, _, err := run(ctx, args...)
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		docs[name] = []byte(out)
	}
	metrics := map[string]string{"server /metrics": metricsText(t, serverMetrics), "agent /metrics": metricsText(t, agentMetrics)}
	cancel()
	<-serverDone
	<-agentDone
	for name, logs := range map[string]string{"server log": serverLog.String(), "agent log": agentLog.String()} {
		for i, line := range strings.Split(strings.TrimSpace(logs), "\n") {
			docs[fmt.Sprintf("%s line %d", name, i+1)] = []byte(line)
		}
	}

	leafFP, caFP := hotcert.FingerprintOf(leaf.Cert).String(), hotcert.FingerprintOf(ca.Cert).String()
	seen := map[string]bool{}
	for name, doc := range docs {
		for _, fp := range fingerprints(t, name, doc) {
			if !hexFingerprint.MatchString(fp) {
				t.Errorf("%s: fingerprint %q, want lower-case hex (%s)", name, fp, leafFP)
			}
			seen[name] = seen[name] || fp == leafFP || fp == caFP
		}
	}
	for _, name := range []string{"server /healthz", "agent /healthz", "inspect -o json", "check -o json"} {
		if !seen[name] {
			t.Errorf("%s names neither the leaf's nor the CA's fingerprint:\n%s", name, docs[name])
		}
	}
	for name, body := range metrics {
		labels := metricFingerprint.FindAllStringSubmatch(body, -1)
		if len(labels) == 0 {
			t.Errorf("%s has no sha256 label", name)
		}
		for _, l := range labels {
			if !hexFingerprint.MatchString(l[1]) {
				t.Errorf("%s: sha256=%q, want lower-case hex", name, l[1])
			}
		}
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
