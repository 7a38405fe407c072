package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/controlplane"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/inspect"
	"github.com/hotcert/hotcert/cmd/internal/cli"
	"github.com/hotcert/hotcert/jwtkeys"
)

func newCheckCommand(g *globals) *cobra.Command {
	var (
		opts      inspect.FilesOptions
		output    string
		jwtKeyDir string
		denyList  string
		crlFile   string
	)
	cmd := &cobra.Command{
		Use:   "check --cert-file F --key-file F [--ca-file F] [-o json] | check --jwt-key-dir DIR [-o json]",
		Short: "Validate certificate, key and CA bundle files exactly as the reloader would",
		Long: `Read the files with hotcert's file source and validate them with hotcert.Validate:
the very code a server or agent runs before swapping material in. It checks that
every PEM block parses (a bundle whose second CA is truncated is rejected, not
shortened), that the key matches the certificate, that every certificate is inside
its validity window, that every certificate of the bundle is a CA, and the 1 MiB
size cap and file types.

It prints a summary of what would be served and trusted, or the reason the files
would be refused, and exits non-zero with a one-line reason when they would. Give a
key pair, a bundle (--ca-file alone, as for an agent's ca.crt), or both.

A file that a Kubernetes subPath mount put in place is never updated when its Secret
or ConfigMap changes: check prints a warning for it (never_updated in -o json).

With --jwt-key-dir it validates an agent-token key directory (signing.key and
optional verify.pem, or hs256.keys) with jwtkeys.Validate, as "hotcert server
--jwt-key-dir" would before using it, and prints the key that signs and every key
that verifies (kids and algorithms, never key material).

With --deny-list and/or --crl-file it validates a deny list as "hotcert server
--deny-list/--crl-file" would before enforcing it: every line parses, every CRL
parses, its signature verifies against the CA of --ca-file that issued it, and its
NextUpdate has not passed. It prints the version and the entries (docs/revocation.md).`,
		Example: `  hotcert check --cert-file /tls/tls.crt --key-file /tls/tls.key
  hotcert check --ca-file /etc/agent-ca/ca.crt -o json
  hotcert check --jwt-key-dir /etc/agent-token-keys
  hotcert check --deny-list /etc/revoked/deny.list --crl-file /etc/revoked/ca.crl --ca-file /etc/client-ca/ca.crt`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			asJSON, err := outputFormat(output)
			if err != nil {
				return err
			}
			if _, err := g.logger(); err != nil {
				return err
			}
			if denyList != "" || crlFile != "" {
				if opts.CertFile != "" || opts.KeyFile != "" || jwtKeyDir != "" {
					return errors.New("check a deny list (--deny-list, --crl-file with its --ca-file) on its own, not with --cert-file, --key-file or --jwt-key-dir")
				}
				return checkDenyList(cmd.Context(), g, denyList, crlFile, opts.CAFile, asJSON)
			}
			if jwtKeyDir != "" {
				if opts.CertFile != "" || opts.KeyFile != "" || opts.CAFile != "" {
					return errors.New("check either --jwt-key-dir or certificate files (--cert-file, --key-file, --ca-file), not both at once")
				}
				return checkKeyDir(cmd.Context(), g, jwtKeyDir, asJSON)
			}
			switch {
			case opts.CertFile == "" && opts.KeyFile == "" && opts.CAFile == "":
				return errors.New("nothing to check: give --cert-file and --key-file, --ca-file, or all three (or --jwt-key-dir)")
			case (opts.CertFile == "") != (opts.KeyFile == ""):
				return errors.New("--cert-file and --key-file go together: a certificate is checked with its key")
			}
			rep, checkErr := inspect.Files(cmd.Context(), opts)
			if rep == nil {
				return checkErr
			}
			if checkErr != nil {
				checkErr = inUserTerms(checkErr, fileFlags("--cert-file", opts.CertFile, "--key-file", opts.KeyFile, "--ca-file", opts.CAFile))
			}
			if asJSON {
				if err := writeJSON(g.stdout, rep); err != nil {
					return err
				}
				return reported(checkErr)
			}
			if err := inspect.WriteFiles(g.stdout, rep, time.Now()); err != nil {
				return err
			}
			return checkErr
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.CertFile, "cert-file", "", "certificate chain file (PEM, leaf first)")
	fl.StringVar(&opts.KeyFile, "key-file", "", "private key file (PEM)")
	fl.StringVar(&opts.CAFile, "ca-file", "", "CA bundle file (one or more PEM CA certificates)")
	fl.StringVar(&jwtKeyDir, "jwt-key-dir", "", "validate this agent-token key directory (signing.key [+ verify.pem], or hs256.keys) instead")
	fl.StringVar(&denyList, "deny-list", "", "validate this deny-list file (serial and spki lines; docs/revocation.md) instead")
	fl.StringVar(&crlFile, "crl-file", "", "validate this CRL file (PEM or DER), its signature against --ca-file, instead")
	fl.StringVarP(&output, "output", "o", "text", "output format: text or json")
	cli.Alias(fl, "cert-file", "cert")
	cli.Alias(fl, "key-file", "key")
	cli.Alias(fl, "ca-file", "ca")
	return cmd
}

// keyDirReport is what `check --jwt-key-dir` prints.
type keyDirReport struct {
	OK     bool   `json:"ok"`
	Source string `json:"source"`
	// SigningKeyID and Algorithm name the key that would sign.
	SigningKeyID string `json:"signing_kid,omitempty"`
	Algorithm    string `json:"alg,omitempty"`
	// Keys lists every key that would verify: the signing key, then the listed ones.
	Keys []controlplane.TokenKey `json:"keys,omitempty"`
	// Input, Reason and Error say why the directory would be refused (OK false).
	Input  string `json:"input,omitempty"`
	Reason string `json:"reason,omitempty"`
	Error  string `json:"error,omitempty"`
}

func checkKeyDir(ctx context.Context, g *globals, dir string, asJSON bool) error {
	src, err := keyDirSource(dir, nil)
	if err != nil {
		return err
	}
	rep := keyDirReport{Source: src.String()}
	c, err := src.Read(ctx)
	var m *jwtkeys.Material
	if err == nil {
		m, err = jwtkeys.Validate(c)
	}
	if err != nil {
		rep.Reason, rep.Error = string(hotcert.ReasonOf(err)), err.Error()
		var he *hotcert.Error
		if errors.As(err, &he) {
			rep.Input = he.Input
		}
	} else {
		rep.OK, rep.SigningKeyID, rep.Algorithm = true, m.SigningKeyID(), m.Algorithm()
		for _, k := range m.Keys() {
			rep.Keys = append(rep.Keys, controlplane.TokenKey{ID: k.ID, Algorithm: k.Algorithm, State: string(k.State)})
		}
	}
	if err != nil {
		err = inUserTerms(err, flagFiles{dirs: map[string]string{dir: "--jwt-key-dir"}})
	}
	if asJSON {
		if werr := writeJSON(g.stdout, rep); werr != nil {
			return werr
		}
		return reported(err)
	}
	if werr := writeKeyDirReport(g.stdout, rep); werr != nil {
		return werr
	}
	return err
}

func writeKeyDirReport(w io.Writer, rep keyDirReport) error {
	var b strings.Builder
	fmt.Fprintf(&b, "source: %s\n", rep.Source)
	if !rep.OK {
		fmt.Fprintf(&b, "INVALID (%s): %s\n", rep.Reason, rep.Error)
	} else {
		fmt.Fprintf(&b, "signs:  kid %s (%s)\n", rep.SigningKeyID, rep.Algorithm)
		fmt.Fprintf(&b, "verify: %d keys\n", len(rep.Keys))
		for _, k := range rep.Keys {
			fmt.Fprintf(&b, "  - kid %s (%s, %s)\n", k.ID, k.Algorithm, k.State)
		}
		b.WriteString("OK: hotcert server --jwt-key-dir would load this key directory\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
