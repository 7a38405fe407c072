package inspect

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
)

func TestDescribe(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	leaf := ca.MustIssue(hotcerttest.WithDNSNames("cp.example.com"), hotcerttest.WithIPAddresses(net.ParseIP("10.0.0.1")))
	d := Describe(leaf.Cert)
	if d.SANs() != "DNS:cp.example.com, IP Address:10.0.0.1" || d.SHA256 != hotcert.FingerprintOf(leaf.Cert).String() || d.SHA256Colon() != hotcert.FingerprintOf(leaf.Cert).Colon() || d.IsCA {
		t.Fatalf("%+v", d)
	}
	now := time.Now()
	for when, want := range map[time.Time]string{now: "expires in", now.Add(48 * time.Hour): "EXPIRED", now.Add(-time.Hour): "NOT YET VALID"} {
		if got := d.Validity(when); !strings.Contains(got, want) {
			t.Errorf("Validity at %s = %q, want %q", when, got, want)
		}
	}
}

func TestFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	put := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ca, other := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	inter := ca.MustNewIntermediate()
	leaf := inter.MustIssue()
	crt, key := put("tls.crt", leaf.ChainPEM), put("tls.key", leaf.KeyPEM)

	rep, err := Files(ctx, FilesOptions{CertFile: crt, KeyFile: key, CAFile: put("ca.crt", hotcerttest.BundlePEM(ca))})
	if err != nil || !rep.OK || len(rep.Chain) != 2 || !rep.ChainsToBundle.OK || !strings.HasPrefix(rep.Summary(), "ok: ") {
		t.Fatalf("good files: %v %+v", err, rep)
	}
	rep, err = Files(ctx, FilesOptions{CertFile: crt, KeyFile: key, CAFile: put("other.crt", hotcerttest.BundlePEM(other))})
	if err != nil || !rep.OK || rep.ChainsToBundle.OK {
		t.Fatalf("a leaf that does not chain to the bundle still loads, reported: %v %+v", err, rep)
	}
	bad := put("bad.crt", hotcerttest.Truncate(hotcerttest.BundlePEM(ca, other)))
	rep, err = Files(ctx, FilesOptions{CAFile: bad})
	if err == nil || rep.OK || rep.Reason != "pem" || rep.Input != bad || rep.Summary() != err.Error() {
		t.Fatalf("truncated bundle: %v %+v", err, rep)
	}
	if _, err := Files(ctx, FilesOptions{CertFile: crt}); err == nil {
		t.Fatal("a certificate without its key was accepted")
	}
}

func TestRemoteErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := Remote(ctx, RemoteOptions{Address: "no-port"}); err == nil {
		t.Fatal("an address without a port was accepted")
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	if _, err := Remote(ctx, RemoteOptions{Address: addr, Timeout: time.Second}); err == nil || !strings.Contains(err.Error(), addr) {
		t.Fatalf("closed port: %v", err)
	}
	empty := filepath.Join(t.TempDir(), "empty.crt")
	os.WriteFile(empty, nil, 0o600)
	if _, err := Remote(ctx, RemoteOptions{Address: addr, CAFile: empty}); err == nil || !strings.Contains(err.Error(), "CA bundle") {
		t.Fatalf("empty bundle: %v", err)
	}
}
