package main

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/inspect"
	"github.com/hotcert/hotcert/internal/kubetest"
	"github.com/hotcert/hotcert/internal/testutil"
)

// `hotcert server --tls-secret` against a real API server: the Secret's pair is
// served, an update is served on the next handshake, a bad update keeps the last
// good pair and is logged once naming the Secret.
func TestServerFromSecret(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.NewNamespace(t)
	secrets := env.Clientset().CoreV1().Secrets(ns)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	ca := hotcerttest.MustNewCA()
	first := ca.MustIssue()
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "agent-grpc-tls"},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"tls.crt": first.ChainPEM, "tls.key": first.KeyPEM},
	}
	if _, err := secrets.Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	log := &testutil.LogBuffer{}
	done := start(ctx, log, "server", "--log-format", "json", "--listen", "127.0.0.1:0",
		"--tls-secret", ns+"/agent-grpc-tls", "--kubeconfig", writeTemp(t, "kubeconfig", env.KubeConfig()), "--settle", "50ms")
	addr := logAttr(t, log, "control plane listening", "addr")
	serves := func(leaf *hotcerttest.Leaf) func() bool {
		return func() bool {
			rep, err := inspect.Remote(ctx, inspect.RemoteOptions{Address: addr})
			return err == nil && rep.Certificate.Serial == inspect.SerialHex(leaf.Cert.SerialNumber)
		}
	}
	testutil.WaitFor(t, "the Secret's certificate to be served", serves(first))

	renewed := ca.MustIssue()
	sec.Data = map[string][]byte{"tls.crt": renewed.ChainPEM, "tls.key": renewed.KeyPEM}
	if _, err := secrets.Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the updated Secret to be served", serves(renewed))

	sec.Data = map[string][]byte{"tls.crt": ca.MustIssue().ChainPEM, "tls.key": renewed.KeyPEM}
	if _, err := secrets.Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the failure line", func() bool { return findLine(log.String(), "TLS certificate reload failed") != nil })
	line := findLine(log.String(), "TLS certificate reload failed")
	if line["listener"] != "agent_grpc" || !strings.Contains(line["source"].(string), ns+"/agent-grpc-tls") {
		t.Fatalf("failure line %v: want listener=agent_grpc and the Secret", line)
	}
	if !serves(renewed)() {
		t.Fatal("the last good certificate is no longer served")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("server: %v", err)
	}
	if n := strings.Count(log.String(), `"msg":"TLS certificate reload failed"`); n != 1 {
		t.Fatalf("%d failure lines, want 1", n)
	}
}
