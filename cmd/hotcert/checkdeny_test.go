package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
)

// TestCheckDenyList: hotcert check validates a deny list and a CRL as the
// reloader would — a good pair prints its version and entries; a garbage list, a
// forged CRL and a stale CRL each exit non-zero with the reason.
func TestCheckDenyList(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	dir := t.TempDir()
	ca := hotcerttest.MustNewCA(hotcerttest.WithCommonName("agents CA"))
	leaf := ca.MustIssue()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caFile := write("ca.crt", ca.CertPEM)
	list := write("deny.list", fmt.Appendf(nil, "# revoked\nserial %s issuer %s\n", hotcert.FormatSerial(leaf.Cert.SerialNumber), hotcert.FingerprintOf(ca.Cert)))
	crl := write("ca.crl", ca.MustCRL(9, now.Add(-time.Hour), now.Add(time.Hour), leaf.Cert.SerialNumber))

	out, _, err := run(ctx, "check", "--deny-list", list, "--crl-file", crl, "--ca-file", caFile, "-o", "json")
	var rep denyListReport
	if err != nil || json.Unmarshal([]byte(out), &rep) != nil || !rep.OK || rep.List.Serials != 1 || len(rep.List.CRLs) != 1 || rep.List.Version == "" {
		t.Fatalf("good deny list: err %v\n%s", err, out)
	}
	if out, _, err := run(ctx, "check", "--deny-list", list); err != nil || !strings.Contains(out, "OK: a hotcert deny list would load") {
		t.Fatalf("deny list alone: err %v\n%s", err, out)
	}
	forger := hotcerttest.MustNewCA(hotcerttest.WithCommonName("agents CA"))
	for name, args := range map[string][]string{
		"garbage list": {"--deny-list", write("bad.list", []byte("revoke all\n"))},
		"forged CRL":   {"--crl-file", write("forged.crl", forger.MustCRL(1, now.Add(-time.Hour), now.Add(time.Hour))), "--ca-file", caFile},
		"stale CRL":    {"--crl-file", write("stale.crl", ca.MustCRL(1, now.Add(-2*time.Hour), now.Add(-time.Hour))), "--ca-file", caFile},
		"CRL, no CA":   {"--crl-file", crl},
	} {
		out, _, err := run(ctx, append([]string{"check", "-o", "json"}, args...)...)
		var rep denyListReport
		if err == nil || json.Unmarshal([]byte(out), &rep) != nil && name != "CRL, no CA" || rep.OK {
			t.Errorf("%s: err %v, want a non-zero exit and a JSON failure:\n%s", name, err, out)
		}
	}
}
