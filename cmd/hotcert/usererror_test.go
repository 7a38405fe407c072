package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/hotcert/hotcert/hotcerttest"
)

// TestMaterialErrorsInUserTerms: a startup error about bad material is exactly the
// flag, then the library's own text (the file and what is wrong with it), whatever
// layers it passed through — the CLI adds the flag and rewords nothing.
func TestMaterialErrorsInUserTerms(t *testing.T) {
	ctx := context.Background()
	ca := hotcerttest.MustNewCA()
	leaf := ca.MustIssue()
	crt, key := writeTemp(t, "tls.crt", leaf.ChainPEM), writeTemp(t, "tls.key", leaf.KeyPEM)
	other := writeTemp(t, "other.key", ca.MustIssue().KeyPEM)
	empty := writeTemp(t, "empty.crt", nil)
	bundle := hotcerttest.BundlePEM(ca, hotcerttest.MustNewCA())
	cut := writeTemp(t, "cut.crt", append(bytes.Clone(bundle[:bytes.Index(bundle, []byte("-----END"))+len("-----END CERTIFICATE-----\n")]), "-----BEGIN"...))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"server", "--cert-file", empty, "--key-file", key}, "--cert-file " + empty + ": certificate chain holds no certificate"},
		{[]string{"server", "--cert-file", crt, "--key-file", other}, "--key-file " + other + ": private key does not match the certificate in " + crt},
		{[]string{"check", "--cert-file", crt, "--key-file", key, "--ca-file", cut}, "--ca-file " + cut + ": line 12 starts with dashes but is not a whole BEGIN or END line (a cut block?)"},
		{[]string{"agent", "--server", "127.0.0.1:1", "--ca-file", empty}, "--ca-file " + empty + ": CA bundle holds no certificate"},
	} {
		_, _, err := run(ctx, tc.args...)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%v:\n got %v\nwant %s", tc.args, err, tc.want)
		}
	}
}
