package main

import (
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/hotcert/hotcert/internal/inspect"
)

func newCheckCommand(g *globals) *cobra.Command {
	var (
		opts   inspect.FilesOptions
		output string
	)
	cmd := &cobra.Command{
		Use:   "check --cert F --key F [--ca F] [-o json]",
		Short: "Validate certificate, key and CA bundle files exactly as the reloader would",
		Long: `Read the files with hotcert's file source and validate them with hotcert.Validate:
the very code a server or agent runs before swapping material in. It checks that
every PEM block parses (a bundle whose second CA is truncated is rejected, not
shortened), that the key matches the certificate, that every certificate is inside
its validity window, that every certificate of the bundle is a CA, and the 1 MiB
size cap and file types.

It prints a summary of what would be served and trusted, or the reason the files
would be refused, and exits non-zero with a one-line reason when they would. Give a
key pair, a bundle (--ca alone, as for an agent's ca.crt), or both.`,
		Example: `  hotcert check --cert /tls/tls.crt --key /tls/tls.key
  hotcert check --ca /etc/agent-ca/ca.crt -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			asJSON, err := outputFormat(output)
			if err != nil {
				return err
			}
			if _, err := g.logger(); err != nil {
				return err
			}
			if opts.CertFile == "" && opts.KeyFile == "" && opts.CAFile == "" {
				return errors.New("nothing to check: give --cert and --key, --ca, or all three")
			}
			rep, checkErr := inspect.Files(cmd.Context(), opts)
			if rep == nil {
				return checkErr
			}
			if asJSON {
				err = writeJSON(g.stdout, rep)
			} else {
				err = inspect.WriteFiles(g.stdout, rep, time.Now())
			}
			if checkErr != nil {
				return checkErr
			}
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.CertFile, "cert", "", "certificate chain file (PEM, leaf first)")
	fl.StringVar(&opts.KeyFile, "key", "", "private key file (PEM)")
	fl.StringVar(&opts.CAFile, "ca", "", "CA bundle file (one or more PEM CA certificates)")
	fl.StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}
