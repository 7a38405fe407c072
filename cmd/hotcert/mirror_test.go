package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"software.sslmate.com/src/go-pkcs12"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/mirroring"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
)

// TestMirrorCommand runs `hotcert mirror` on a kubelet-style Secret volume: it
// writes PEM and PKCS#12 files, reports what it holds like every hotcert process
// (the *_info series, /healthz) and what it wrote (the mirror series), follows a
// renewal, and refuses a key that does not match — one line, one count, every
// file as it was, /healthz still healthy and naming the failure.
func TestMirrorCommand(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	leaf := ca.MustIssue()
	dir := t.TempDir()
	vol := hotcerttest.MustNewAtomicWriter(filepath.Join(dir, "tls"))
	vol.MustWrite(map[string][]byte{"tls.crt": leaf.ChainPEM, "tls.key": leaf.KeyPEM, "ca.crt": ca.CertPEM})
	pw := writeTemp(t, "password", []byte("changeit\n"))
	out := filepath.Join(dir, "out")
	ctx, cancel := context.WithCancel(context.Background())
	log := &testutil.LogBuffer{}
	done := start(ctx, log, "mirror", "--log-format", "json", "--metrics-bind-address", "127.0.0.1:0", "--settle", "0",
		"--cert-file", filepath.Join(vol.Dir(), "tls.crt"), "--key-file", filepath.Join(vol.Dir(), "tls.key"),
		"--ca-file", filepath.Join(vol.Dir(), "ca.crt"), "--pkcs12-password-file", pw, "--out", out)
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("hotcert mirror: %v", err)
		}
	}()
	addr := logAttr(t, log, "metrics and health listening", "addr")

	var st mirroring.Status
	if code := getJSON(t, "http://"+addr+"/healthz", &st); code != 200 || !st.Healthy || !st.Mirror.InSync || st.Held.Leaf == nil ||
		st.Held.Leaf.SHA256 != hotcert.FingerprintOf(leaf.Cert).String() || len(st.Mirror.Files) != 5 {
		t.Fatalf("/healthz: %d %+v", code, st)
	}
	requireMetric(t, addr, `hotcert_tls_cert_info{component="mirror",issuer="`+leaf.Cert.Issuer.String()+`",serial="`+
		hotcert.FormatSerial(leaf.Cert.SerialNumber)+`",sha256="`+hotcert.FingerprintOf(leaf.Cert).String()+`"} 1`)
	requireMetric(t, addr, `hotcert_tls_ca_certificate_info{component="mirror",sha256="`+hotcert.FingerprintOf(ca.Cert).String()+`",subject="`+ca.Cert.Subject.String()+`"} 1`)
	requireMetric(t, addr, `hotcert_mirror_updates_total{component="mirror"} 1`)
	requireMetric(t, addr, `hotcert_mirror_files_written_total{component="mirror",file="keystore.p12"} 1`)
	requireMetric(t, addr, `hotcert_mirror_failures_total{component="mirror",reason="write"} 0`)

	next := ca.MustIssue()
	vol.MustWrite(map[string][]byte{"tls.crt": next.ChainPEM, "tls.key": next.KeyPEM, "ca.crt": ca.CertPEM})
	requireMetricEventually(t, addr, `hotcert_mirror_updates_total{component="mirror"} 2`)
	requireMetric(t, addr, `hotcert_mirror_files_written_total{component="mirror",file="ca.crt"} 1`) // the CA did not change
	_, got, _, err := pkcs12.DecodeChain(mustRead(t, filepath.Join(out, "keystore.p12")), "changeit")
	if err != nil || !got.Equal(next.Cert) {
		t.Fatalf("keystore.p12 after the renewal: %v", err)
	}

	before := map[string][]byte{}
	for _, n := range st.Mirror.Files {
		before[n] = mustRead(t, filepath.Join(out, n))
	}
	vol.MustWrite(map[string][]byte{"tls.crt": ca.MustIssue().ChainPEM, "tls.key": next.KeyPEM, "ca.crt": ca.CertPEM})
	requireMetricEventually(t, addr, `hotcert_tls_reload_failures_total{component="mirror"} 1`)
	if n := strings.Count(log.String(), `"msg":"TLS certificate reload failed"`); n != 1 {
		t.Errorf("%d refusal lines, want 1", n)
	}
	for n, b := range before {
		if !bytes.Equal(mustRead(t, filepath.Join(out, n)), b) {
			t.Errorf("%s changed after a refused write", n)
		}
	}
	if code := getJSON(t, "http://"+addr+"/healthz", &st); code != 200 || !st.Healthy || st.LastError == "" || st.ReloadFailures != 1 ||
		st.Mirror.Generation != 2 || !st.Mirror.InSync {
		t.Errorf("/healthz after a refused write: %d %+v", code, st)
	}
	requireMetric(t, addr, `hotcert_mirror_updates_total{component="mirror"} 2`)
	if hotcerttest.ContainsKeyMaterial(log.String()+metricsText(t, addr), leaf, next) || strings.Contains(log.String(), "changeit") {
		t.Errorf("logs or metrics hold key material or the password")
	}
}

// TestMirrorCommandStartupErrors: bad flags and inputs are a one-line reason in
// the user's terms, and nothing is written.
func TestMirrorCommandStartupErrors(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	leaf := ca.MustIssue()
	crt, key := writeTemp(t, "tls.crt", leaf.ChainPEM), writeTemp(t, "tls.key", leaf.KeyPEM)
	empty := writeTemp(t, "password", []byte("\n"))
	out := filepath.Join(t.TempDir(), "out")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--cert-file", crt, "--key-file", key}, "--out is required"},
		{[]string{"--cert-file", crt, "--out", out}, "--cert-file and --key-file go together"},
		{[]string{"--out", out}, "nothing to mirror"},
		{[]string{"--cert-file", crt, "--key-file", key, "--out", out, "--key-file-mode", "0999"}, "--key-file-mode"},
		{[]string{"--cert-file", crt, "--key-file", crt, "--out", out}, "--key-file " + crt},
		{[]string{"--cert-file", crt, "--key-file", key, "--out", out, "--pkcs12-password-file", empty}, "--pkcs12-password-file " + empty + ": PKCS#12 password file is empty"},
	} {
		_, _, err := run(context.Background(), append([]string{"mirror"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("mirror %v: %v, want one line with %q", c.args, err, c.want)
			continue
		}
		requireUserTerms(t, err)
	}
	if ents, _ := os.ReadDir(out); len(ents) != 0 {
		t.Errorf("files written by a command that failed to start: %v", ents)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
