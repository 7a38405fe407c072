package main

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// hotcert pki makes what the runbook needs: a CA, server and client certificates
// with the names, usages and validity asked for, union bundles, all as kubelet-style
// volumes, and issuing into a volume again swaps ..data (a rotation by hand).
func TestPKICommands(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p := func(elem ...string) string { return filepath.Join(append([]string{dir}, elem...)...) }
	mustRun := func(args ...string) string {
		t.Helper()
		out, _, err := run(ctx, args...)
		if err != nil {
			t.Fatalf("hotcert %s: %v", strings.Join(args, " "), err)
		}
		return out
	}
	mustRun("pki", "ca", "--dir", p("ca-old"), "--name", "example CA 2025")
	mustRun("pki", "ca", "--dir", p("ca-new"), "--name", "example CA 2026")
	mustRun("pki", "issue", "--ca-dir", p("ca-old"), "--out", p("tls"), "--name", "cp", "--dns", "cp.example.svc,localhost", "--ip", "127.0.0.1")
	mustRun("pki", "issue", "--ca-dir", p("ca-old"), "--out", p("client"), "--name", "agent-1", "--usage", "client")
	mustRun("pki", "issue", "--ca-dir", p("ca-old"), "--out", p("expired"), "--valid-from=-48h", "--validity", "24h")
	mustRun("pki", "issue", "--ca-dir", p("ca-old"), "--out", p("future"), "--valid-from", "1h")
	mustRun("pki", "bundle", "--out", p("agent-ca"), "--ca-dir", p("ca-old"), "--ca-dir", p("ca-new"))

	srv := readCert(t, p("tls", "tls.crt"))
	if srv.Subject.CommonName != "cp" || !slices.Equal(srv.DNSNames, []string{"cp.example.svc", "localhost"}) || len(srv.IPAddresses) != 1 ||
		!slices.Equal(srv.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) || srv.Issuer.CommonName != "example CA 2025" {
		t.Fatalf("server certificate: CN %s, DNS %v, IP %v, EKU %v, issuer %s", srv.Subject.CommonName, srv.DNSNames, srv.IPAddresses, srv.ExtKeyUsage, srv.Issuer)
	}
	if c := readCert(t, p("client", "tls.crt")); !slices.Equal(c.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) {
		t.Fatalf("client certificate EKU %v", c.ExtKeyUsage)
	}
	out := mustRun("check", "--cert-file", p("tls", "tls.crt"), "--key-file", p("tls", "tls.key"), "--ca-file", p("agent-ca", "ca.crt"))
	if !strings.Contains(out, "ca bundle: 2 CA(s)") || !strings.Contains(out, "leaf chains to bundle:  ok") {
		t.Fatalf("check of the issued pair against the union bundle:\n%s", out)
	}
	_, _, err := run(ctx, "check", "--cert-file", p("expired", "tls.crt"), "--key-file", p("expired", "tls.key"))
	requireOneLine(t, err, "expired at")
	_, _, err = run(ctx, "check", "--cert-file", p("future", "tls.crt"), "--key-file", p("future", "tls.key"))
	requireOneLine(t, err, "is not valid before")

	// A rotation by hand: the volume's ..data is swapped, the names stay.
	before, _ := os.Readlink(p("tls", "..data"))
	mustRun("pki", "issue", "--ca-dir", p("ca-new"), "--out", p("tls"))
	after, _ := os.Readlink(p("tls", "..data"))
	if before == "" || before == after || readCert(t, p("tls", "tls.crt")).Issuer.CommonName != "example CA 2026" {
		t.Fatalf("re-issuing into the volume: ..data %q → %q, issuer %s", before, after, readCert(t, p("tls", "tls.crt")).Issuer)
	}
	if fi, err := os.Lstat(p("tls", "tls.crt")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("tls.crt is not a kubelet-style symlink: %v %v", fi, err)
	}
	if fi, err := os.Stat(p("ca-old", "ca.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("ca.key: %v %v, want mode 0600", fi, err)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"pki", "ca", "--dir", p("ca-old")}, "already holds a CA"},
		{[]string{"pki", "ca"}, "--dir is required"},
		{[]string{"pki", "issue", "--ca-dir", p("nothing"), "--out", p("x")}, "holds no CA"},
		{[]string{"pki", "issue", "--ca-dir", p("ca-old"), "--out", p("x"), "--usage", "email"}, `--usage "email"`},
		{[]string{"pki", "issue", "--ca-dir", p("ca-old"), "--out", p("x"), "--valid-from", "yesterday"}, `--valid-from "yesterday"`},
		{[]string{"pki", "issue", "--ca-dir", p("ca-old"), "--out", p("x"), "--ip", "localhost"}, `--ip "localhost"`},
		{[]string{"pki", "bundle", "--out", p("x")}, "--ca-dir"},
	} {
		_, _, err := run(ctx, tc.args...)
		requireOneLine(t, err, tc.want)
	}
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(data)
	if b == nil {
		t.Fatalf("%s: no PEM block", path)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
