package main

import (
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/inspect"
	"github.com/hotcert/hotcert/cmd/internal/cli"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
)

// Every command answers --version with the binary's version.
func TestVersionOnEveryCommand(t *testing.T) {
	want := "hotcert version " + cli.Version() + "\n"
	for _, args := range [][]string{{"--version"}, {"server", "--version"}, {"agent", "--version"}, {"inspect", "--version"},
		{"check", "--version"}, {"demo", "--version"}, {"pki", "--version"}, {"token", "issue", "--version"}} {
		out, _, err := run(context.Background(), args...)
		if err != nil || out != want {
			t.Errorf("hotcert %s: %q, %v; want %q", strings.Join(args, " "), out, err, want)
		}
	}
}

// A mistyped flag or command gets a one-line error naming the closest one.
func TestTyposGetSuggestions(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"server", "--cert-fiel", "x"}, "unknown flag: --cert-fiel (did you mean --cert-file?)"},
		{[]string{"agent", "--ca-fil", "x"}, "did you mean --ca-file?"},
		{[]string{"check", "--log-formt", "json"}, "did you mean --log-format?"},
		{[]string{"inspect", "--zzzzzzzz"}, "see hotcert inspect --help"},
		{[]string{"demp"}, `unknown command "demp" for "hotcert" (did you mean demo?)`},
		{[]string{"pki", "isue"}, `unknown command "isue" for "hotcert pki" (did you mean issue?)`},
		{[]string{"pki"}, "hotcert pki needs a command: bundle, ca, issue"},
		{[]string{"token"}, "hotcert token needs a command: issue"},
	} {
		_, _, err := run(ctx, tc.args...)
		if err == nil || !strings.Contains(cli.Message(err), tc.want) || strings.Contains(cli.Message(err), "\\n") {
			t.Errorf("hotcert %s: %v; want one line containing %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

// One name per concept: the renamed flags still work, hidden from --help.
func TestRenamedFlagsAreDeprecatedAliases(t *testing.T) {
	ctx := context.Background()
	ca := hotcerttest.MustNewCA()
	leaf := ca.MustIssue()
	crt, key := writeTemp(t, "tls.crt", leaf.ChainPEM), writeTemp(t, "tls.key", leaf.KeyPEM)
	bundle := writeTemp(t, "ca.crt", hotcerttest.BundlePEM(ca))
	out, stderr, err := run(ctx, "check", "--cert", crt, "--key", key, "--ca", bundle, "-o", "json")
	var rep inspect.FilesReport
	if err != nil || json.Unmarshal([]byte(out), &rep) != nil || !rep.OK {
		t.Fatalf("check with the deprecated names: %v\n%s", err, out)
	}
	if !strings.Contains(stderr, "Flag --cert has been deprecated, use --cert-file instead") {
		t.Fatalf("no deprecation warning on stderr: %q", stderr)
	}
	for cmd, names := range map[string][2][]string{
		"server": {{"--cert-file", "--key-file", "--ca-file", "--metrics-bind-address"}, {"--tls-cert", "--tls-key", "--client-ca", "--metrics-listen"}},
		"agent":  {{"--cert-file", "--key-file", "--ca-file", "--metrics-bind-address"}, {"--tls-cert", "--tls-key", "--metrics-listen"}},
		"check":  {{"--cert-file", "--key-file", "--ca-file"}, {"--cert ", "--key ", "--ca "}},
	} {
		out, _, err := run(ctx, cmd, "--help")
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names[0] {
			if !strings.Contains(out, n) {
				t.Errorf("%s --help lacks %s", cmd, n)
			}
		}
		for _, n := range names[1] {
			if strings.Contains(out, n) {
				t.Errorf("%s --help shows the deprecated %s", cmd, n)
			}
		}
	}
}

// inspect fails when the certificate does not name the server name, with or
// without a bundle; without an address it says what it needs; with -o json its
// failures are JSON too.
func TestInspectVerdictsAndJSONFailures(t *testing.T) {
	ctx := context.Background()
	ca := hotcerttest.MustNewCA()
	addr := startServer(t, ca.MustIssue())

	out, _, err := run(ctx, "inspect", addr, "--server-name", "cp.example.com")
	requireOneLine(t, err, "does not name cp.example.com")
	if !strings.Contains(out, "FAILS") || !strings.Contains(out, "chain was not verified") {
		t.Fatalf("inspect text without a bundle:\n%s", out)
	}
	out, _, err = run(ctx, "inspect", addr, "--server-name", "cp.example.com", "-o", "json")
	var rep inspect.RemoteReport
	if err == nil || json.Unmarshal([]byte(out), &rep) != nil || rep.Hostname.OK || rep.OK {
		t.Fatalf("inspect -o json of a wrong name: err %v, output:\n%s", err, out)
	}
	out, _, err = run(ctx, "inspect", addr, "--server-name", "localhost", "-o", "json")
	if err != nil || json.Unmarshal([]byte(out), &rep) != nil || !rep.OK {
		t.Fatalf("inspect -o json of a matching name: err %v, output:\n%s", err, out)
	}
	if _, _, err := run(ctx, "inspect", addr, "--server-name", "localhost"); err != nil {
		t.Fatalf("inspect of a matching name without a bundle: %v", err)
	}

	_, _, err = run(ctx, "inspect")
	requireOneLine(t, err, "inspect needs the address of one replica: hotcert inspect HOST:PORT")

	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := ln.Addr().String()
	ln.Close()
	for _, args := range [][]string{
		{"inspect", closed, "-o", "json"},
		{"inspect", "-o", "json"},
		{"check", "-o", "json"},
		{"check", "--ca-file", filepath.Join(t.TempDir(), "missing.crt"), "-o", "json"},
	} {
		out, _, err := run(ctx, args...)
		var failure struct {
			OK    bool   `json:"ok"`
			Error string `json:"error"`
		}
		if err == nil || json.Unmarshal([]byte(out), &failure) != nil || failure.OK || failure.Error == "" {
			t.Errorf("hotcert %s: err %v; want a non-zero exit and a JSON failure on stdout, got:\n%s", strings.Join(args, " "), err, out)
		}
		if strings.Count(out, `"ok"`) != 1 {
			t.Errorf("hotcert %s printed more than one JSON document:\n%s", strings.Join(args, " "), out)
		}
	}
}

// inspect --wait looks again until the replica passes: here, until it serves the
// certificate of the new CA written while inspect waits.
func TestInspectWaitsForTheReplicaToPass(t *testing.T) {
	ctx := context.Background()
	oldCA, newCA := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	vol := hotcerttest.MustNewAtomicWriter(filepath.Join(t.TempDir(), "tls"))
	first := oldCA.MustIssue()
	vol.MustWrite(map[string][]byte{"tls.crt": first.ChainPEM, "tls.key": first.KeyPEM})
	addr, srv := startServerOn(t, filepath.Join(vol.Dir(), "tls.crt"), filepath.Join(vol.Dir(), "tls.key"))
	onlyNew := writeTemp(t, "new-ca.crt", hotcerttest.BundlePEM(newCA))

	_, _, err := run(ctx, "inspect", addr, "--ca-file", onlyNew)
	requireOneLine(t, err, "no CA in the bundle verifies")

	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, _, err := run(ctx, "inspect", addr, "--ca-file", onlyNew, "--wait", "2m")
		done <- result{out, err}
	}()
	// Rotate only once the waiting inspect has looked and been refused (a handshake
	// after the one above), so that passing proves it looked again.
	handshakes := srv.Stats().Handshakes
	testutil.WaitFor(t, "inspect --wait to look a first time", func() bool { return srv.Stats().Handshakes > handshakes })
	next := newCA.MustIssue()
	vol.MustWrite(map[string][]byte{"tls.crt": next.ChainPEM, "tls.key": next.KeyPEM})
	r := <-done
	if r.err != nil || !strings.Contains(r.out, "VERIFIED") || !strings.Contains(r.out, hotcert.FormatSerial(next.Cert.SerialNumber)) {
		t.Fatalf("inspect --wait: %v\n%s", r.err, r.out)
	}
}
