package file

import (
	"bytes"
	"encoding/pem"
	"errors"
	"strings"
	"testing"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
)

// FuzzCredentialBundle splits arbitrary files as credential bundles. It must never
// panic; a refusal is a *hotcert.Error naming the file; an accepted file gives a
// chain of only certificates and a key part of only key (or parameter) blocks, which
// together hold every block of the file, in file order; and validating the parts
// never panics.
func FuzzCredentialBundle(f *testing.F) {
	l := hotcerttest.MustNewCA().MustNewIntermediate().MustIssue()
	f.Add(append(append([]byte{}, l.KeyPEM...), l.ChainPEM...))
	f.Add(append(append([]byte{}, l.ChainPEM...), l.KeyPEM...))
	f.Add(append([]byte("-----BEGIN EC PARAMETERS-----\nBggqhkjOPQMBBw==\n-----END EC PARAMETERS-----\n"), l.ChainPEM...))
	f.Add([]byte("comment\n-----BEGIN CERTIFICATE REQUEST-----\nMA==\n-----END CERTIFICATE REQUEST-----\n"))
	f.Add(hotcerttest.Truncate(append(append([]byte{}, l.KeyPEM...), l.ChainPEM...)))
	f.Fuzz(func(t *testing.T, data []byte) {
		const name = "/run/identity/credentialbundle.pem"
		chain, key, err := splitCredentialBundle(hotcert.Input{Name: name, Data: data})
		if err != nil {
			var he *hotcert.Error
			if !errors.As(err, &he) || !strings.HasPrefix(err.Error(), name) || he.Reason == "" {
				t.Fatalf("refusal does not name the file with a reason: %v", err)
			}
			return
		}
		all, err := hotcert.DecodePEM(hotcert.Input{Name: name, Data: data})
		if err != nil {
			t.Fatalf("split a file the PEM grammar refuses: %v", err)
		}
		var certs, keys []*pem.Block
		for _, part := range []struct {
			in    hotcert.Input
			into  *[]*pem.Block
			ofKey bool
		}{{chain, &certs, false}, {key, &keys, true}} {
			if !part.in.Present() {
				continue
			}
			if part.in.Name != name {
				t.Fatalf("part named %q, want the file", part.in.Name)
			}
			blocks, err := hotcert.DecodePEM(part.in)
			if err != nil {
				t.Fatalf("a part does not decode: %v", err)
			}
			for _, b := range blocks {
				if isKey := b.Type != "CERTIFICATE"; isKey != part.ofKey {
					t.Fatalf("block %q in the wrong part", b.Type)
				}
			}
			*part.into = blocks
		}
		if len(certs)+len(keys) != len(all) || len(all) == 0 {
			t.Fatalf("%d certificate and %d key blocks from a file of %d", len(certs), len(keys), len(all))
		}
		ci, ki := 0, 0
		for _, b := range all {
			next := &ci
			part := certs
			if b.Type != "CERTIFICATE" {
				next, part = &ki, keys
			}
			if !bytes.Equal(part[*next].Bytes, b.Bytes) {
				t.Fatal("a block changed or moved within its part")
			}
			*next++
		}
		_, _ = hotcert.Validate(hotcert.Content{Cert: chain, Key: key})
	})
}
