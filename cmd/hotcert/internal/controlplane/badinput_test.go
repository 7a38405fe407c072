package controlplane_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/agent"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/controlplane"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/source/file"
)

// tooLarge is above the 1 MiB input cap.
var tooLarge = bytes.Repeat([]byte("A"), hotcert.DefaultMaxInputSize+1)

// Every bad input applied to the server's files: service continues on the last good
// certificate (streams stay up, new handshakes succeed), one log line and one count
// per bad input (not per handshake or poll), recovery on the next good write.
func TestBadServerFilesKeepLastGoodAndCountOnce(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	other := hotcerttest.MustNewCA()
	served := ca.MustIssue()
	r, other1 := startReplica(t, "cp-0", served), startReplica(t, "cp-1", served)
	replicas := []*replica{r, other1}
	vol := newCAVolume(t, ca)
	agents := startAgents(t, nAgents, replicas, vol)
	onR := agents[:0:0]
	for _, a := range agents {
		if a.replica == r {
			onR = append(onR, a)
		}
	}

	expired := ca.MustIssue(hotcerttest.WithValidity(time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour)))
	future := ca.MustIssue(hotcerttest.WithValidity(time.Now().Add(time.Hour), time.Now().Add(48*time.Hour)))
	cases := []struct {
		name   string
		reason hotcert.Reason
		apply  func(next *hotcerttest.Leaf)
	}{
		{"half-written certificate (in place)", hotcert.ReasonPEM, func(next *hotcerttest.Leaf) {
			if err := hotcerttest.WriteFileNonAtomic(r.certPath(), hotcerttest.Truncate(next.ChainPEM)); err != nil {
				t.Fatal(err)
			}
		}},
		{"key does not match", hotcert.ReasonKeyMismatch, func(next *hotcerttest.Leaf) { r.write(t, next.ChainPEM, served.KeyPEM) }},
		{"certificate from another CA's key", hotcert.ReasonKeyMismatch, func(*hotcerttest.Leaf) { r.write(t, other.MustIssue().ChainPEM, served.KeyPEM) }},
		{"empty certificate", hotcert.ReasonEmpty, func(next *hotcerttest.Leaf) { r.write(t, nil, next.KeyPEM) }},
		{"no PEM in certificate", hotcert.ReasonEmpty, func(next *hotcerttest.Leaf) { r.write(t, []byte("not a certificate\n"), next.KeyPEM) }},
		{"certificate and key swapped", hotcert.ReasonPEM, func(next *hotcerttest.Leaf) { r.write(t, next.KeyPEM, next.ChainPEM) }},
		{"expired certificate", hotcert.ReasonExpired, func(*hotcerttest.Leaf) { r.write(t, expired.ChainPEM, expired.KeyPEM) }},
		{"not yet valid certificate", hotcert.ReasonNotYetValid, func(*hotcerttest.Leaf) { r.write(t, future.ChainPEM, future.KeyPEM) }},
		{"key file removed", hotcert.ReasonMissing, func(next *hotcerttest.Leaf) {
			if _, err := r.dir.Write(map[string][]byte{"tls.crt": next.ChainPEM}); err != nil {
				t.Fatal(err)
			}
		}},
		{"certificate too large", hotcert.ReasonTooLarge, func(next *hotcerttest.Leaf) { r.write(t, tooLarge, next.KeyPEM) }},
	}
	for i, tc := range cases {
		next := ca.MustIssue()
		tc.apply(next)
		want := float64(i + 1)
		testutil.WaitFor(t, tc.name+": one failure counted", func() bool { return r.failures(t) >= want })
		line := lastLine(r.logs.String(), "TLS certificate reload failed")
		for _, s := range []string{"component=agent_grpc", r.certPath(), r.keyPath(), "reason=" + string(tc.reason)} {
			if !strings.Contains(line, s) {
				t.Fatalf("%s: failure line lacks %q: %s", tc.name, s, line)
			}
		}
		// Service continues: the last good certificate on new handshakes, streams up.
		if rep := remote(t, r, vol.path()); rep.Certificate.Serial != hotcert.FormatSerial(served.Cert.SerialNumber) || !rep.Bundle.Verified {
			t.Fatalf("%s: replica serves %s (verified %v), want the last good %s", tc.name, rep.Certificate.Serial, rep.Bundle.Verified, hotcert.FormatSerial(served.Cert.SerialNumber))
		}
		reconnectAll(t, replicas, agents)
		requireServerCert(t, onR, served)
		// Counted once: not again per handshake, poll or file event.
		time.Sleep(3 * poll)
		if got := r.failures(t); got != want {
			t.Fatalf("%s: failure counter = %v, want %v", tc.name, got, want)
		}
		if n := r.logs.Count("TLS certificate reload failed"); n != i+1 {
			t.Fatalf("%s: %d failure lines, want %d:\n%s", tc.name, n, i+1, r.logs)
		}
		if st := r.srv.Status(); st.LastError == "" || !st.Healthy {
			t.Fatalf("%s: status = %+v, want healthy with the last error", tc.name, st)
		}
		// Recovery on the next good write.
		r.serve(t, next)
		served = next
		if st := r.srv.Status(); st.LastError != "" {
			t.Fatalf("%s: last error %q not cleared by a good write", tc.name, st.LastError)
		}
	}
	requireNoFailures(t, "bad server files", replicas, agents)
	if other1.failures(t) != 0 || other1.logs.Count("TLS certificate reload failed") != 0 {
		t.Fatal("the other replica counted failures")
	}
	if hotcerttest.ContainsKeyMaterial(r.logs.String(), served) {
		t.Fatal("the replica's log contains key material")
	}
}

// Every bad input applied to the agents' CA bundle: each agent keeps verifying with
// the last good bundle (reconnects succeed), logs "agent TLS CA bundle reload
// failed" with the file once and counts once (not once per dial), and takes the
// next good bundle.
func TestBadAgentBundleKeepsLastGoodAndCountsOnce(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	leaf := ca.MustIssue()
	replicas := []*replica{startReplica(t, "cp-0", leaf), startReplica(t, "cp-1", leaf)}
	vol := newCAVolume(t, ca)
	agents := startAgents(t, nAgents, replicas, vol)

	cases := []struct {
		name   string
		reason hotcert.Reason
		apply  func()
	}{
		{"empty bundle", hotcert.ReasonEmpty, func() { vol.set(t, nil) }},
		{"no certificate in bundle", hotcert.ReasonEmpty, func() { vol.set(t, []byte("# placeholder\n")) }},
		{"second CA truncated", hotcert.ReasonPEM, func() { vol.set(t, hotcerttest.Truncate(hotcerttest.BundlePEM(ca, hotcerttest.MustNewCA()))) }},
		{"half-written bundle (in place)", hotcert.ReasonPEM, func() {
			if err := hotcerttest.WriteFileNonAtomic(vol.path(), hotcerttest.Truncate(hotcerttest.BundlePEM(ca))); err != nil {
				t.Fatal(err)
			}
		}},
		{"leaf certificate in bundle", hotcert.ReasonNotCA, func() { vol.set(t, append(hotcerttest.BundlePEM(ca), leaf.CertPEM...)) }},
		{"private key instead of bundle", hotcert.ReasonPEM, func() { vol.set(t, leaf.KeyPEM) }},
		{"bundle removed", hotcert.ReasonMissing, func() {
			if _, err := vol.Write(map[string][]byte{"other": []byte("x")}); err != nil {
				t.Fatal(err)
			}
		}},
		{"bundle too large", hotcert.ReasonTooLarge, func() { vol.set(t, tooLarge) }},
	}
	for i, tc := range cases {
		tc.apply()
		// Every agent re-reads the bundle on its reconnect, and still connects.
		reconnectAll(t, replicas, agents)
		reconnectAll(t, replicas, agents) // a second dial of the same bad bundle counts nothing
		for _, a := range agents {
			if got := a.caFailures(t); got != float64(i+1) {
				t.Fatalf("%s: %s failure counter = %v, want %d", tc.name, a.ID(), got, i+1)
			}
			if n := a.logs.Count("agent TLS CA bundle reload failed"); n != i+1 {
				t.Fatalf("%s: %s logged %d failure lines, want %d:\n%s", tc.name, a.ID(), n, i+1, a.logs)
			}
			line := lastLine(a.logs.String(), "agent TLS CA bundle reload failed")
			for _, s := range []string{"file=" + vol.path(), "reason=" + string(tc.reason)} {
				if !strings.Contains(line, s) {
					t.Fatalf("%s: %s: failure line lacks %q: %s", tc.name, a.ID(), s, line)
				}
			}
		}
		// Recovery: the next good bundle (a new union each time) is used.
		good := hotcerttest.BundlePEM(ca, hotcerttest.MustNewCA())
		vol.set(t, good)
		reconnectAll(t, replicas, agents)
		for _, a := range agents {
			if n := len(a.CA().Current().TrustCertificates()); n != 2 || a.CA().Status().LastError != nil {
				t.Fatalf("%s: %s did not take the next good bundle (%d CAs, last error %v)", tc.name, a.ID(), n, a.CA().Status().LastError)
			}
		}
	}
	requireNoFailures(t, "bad agent bundles", replicas, agents)
}

// A missing or invalid file at startup is a startup error, on both sides.
func TestMissingOrInvalidFilesAtStartupAreErrors(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	leaf := ca.MustIssue()
	dir := t.TempDir()
	put := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	crt, key := put("tls.crt", leaf.ChainPEM), put("tls.key", leaf.KeyPEM)
	badKey := put("other.key", ca.MustIssue().KeyPEM)
	empty := put("empty.crt", nil)
	truncated := put("truncated.crt", hotcerttest.Truncate(hotcerttest.BundlePEM(ca, hotcerttest.MustNewCA())))
	missing := filepath.Join(dir, "missing")

	for _, tc := range []struct{ crt, key, want string }{
		{crt, missing, missing},
		{missing, key, missing},
		{crt, badKey, "does not match"},
		{empty, key, empty},
	} {
		src, err := file.New(file.WithKeyPair(tc.crt, tc.key))
		if err != nil {
			t.Fatal(err)
		}
		_, err = controlplane.New(controlplane.Config{TLS: src})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("server with %s + %s: error %v, want one naming %q", tc.crt, tc.key, err, tc.want)
		}
	}
	for _, bundle := range []string{missing, empty, truncated, key} {
		_, err := agent.New(agent.Config{Server: "127.0.0.1:1", CAFile: bundle})
		if err == nil || !strings.Contains(err.Error(), bundle) {
			t.Errorf("agent with bundle %s: error %v, want one naming the file", bundle, err)
		}
	}
}

func lastLine(logs, msg string) string {
	var last string
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, fmt.Sprintf("msg=%q", msg)) {
			last = l
		}
	}
	return last
}
