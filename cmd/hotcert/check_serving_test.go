package main

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hotcert/hotcert/cmd/hotcert/internal/inspect"
	"github.com/hotcert/hotcert/hotcerttest"
)

// TestCheckWarnsOfPoorServingPair: a pair the reloader loads but clients refuse
// as a server certificate (a CA certificate, no subjectAltName, no serverAuth)
// is OK with a warning, in the text and in -o json, as a subPath mount is; a
// good serving pair has none.
func TestCheckWarnsOfPoorServingPair(t *testing.T) {
	ctx := context.Background()
	ca := hotcerttest.MustNewCA()
	clientOnly := ca.MustIssue(hotcerttest.WithExtKeyUsages(x509.ExtKeyUsageClientAuth))
	good := ca.MustIssue()
	for _, tc := range []struct {
		name     string
		crt, key []byte
		want     []string
	}{
		{"a CA certificate as the pair", ca.CertPEM, ca.KeyPEM, []string{"is a CA certificate (basicConstraints CA:TRUE)", "names no DNS name or IP address (no subjectAltName)"}},
		{"a client certificate", clientOnly.ChainPEM, clientOnly.KeyPEM, []string{"extended key usages leave out serverAuth"}},
		{"a serving certificate", good.ChainPEM, good.KeyPEM, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			crt, key := writeTemp(t, "tls.crt", tc.crt), writeTemp(t, "tls.key", tc.key)
			out, _, err := run(ctx, "check", "--cert-file", crt, "--key-file", key)
			if err != nil {
				t.Fatalf("check: %v\n%s", err, out)
			}
			if got := strings.Count(out, "warning:"); got != len(tc.want) {
				t.Errorf("%d warning lines, want %d:\n%s", got, len(tc.want), out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("no warning %q in:\n%s", w, out)
				}
			}
			if !strings.Contains(out, "result: OK") {
				t.Errorf("the reloader loads these files; check says otherwise:\n%s", out)
			}
			out, _, err = run(ctx, "check", "--cert-file", crt, "--key-file", key, "-o", "json")
			if err != nil {
				t.Fatal(err)
			}
			var rep inspect.FilesReport
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if !rep.OK || len(rep.Warnings) != len(tc.want) {
				t.Fatalf("json: ok %v, warnings %q, want %q", rep.OK, rep.Warnings, tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(rep.Warnings[i], w) {
					t.Errorf("json warning %q, want %q", rep.Warnings[i], w)
				}
			}
		})
	}
}
