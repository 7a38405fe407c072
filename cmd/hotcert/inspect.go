package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hotcert/hotcert/cmd/hotcert/internal/inspect"
)

func newInspectCommand(g *globals) *cobra.Command {
	var (
		opts   inspect.RemoteOptions
		output string
		alpn   string
	)
	cmd := &cobra.Command{
		Use:   "inspect ADDR [--server-name N] [--ca-file F] [-o json]",
		Short: "Show the certificate a replica serves and whether a CA bundle verifies it",
		Long: `Dial one replica (a pod, not a load-balanced Service) with ALPN h2, as a gRPC
client does, and print the certificate it serves: subject, issuer, serial, SANs,
validity, SHA-256 fingerprint (openssl's format), the negotiated ALPN, and the chain.

With --ca-file, every CA of the bundle is tried on its own: the report says, per CA,
whether the served chain verifies, and whether the certificate names the server name.
The chain is fetched without verification and verified explicitly, so a replica no
agent would accept is still shown. The exit status is non-zero when no CA of the
bundle verifies the replica (what an agent with that bundle would refuse), or when
the replica cannot be reached.

Before removing the old CA (step 3 of a CA rotation), run it against every replica
with a bundle holding only the new CA.`,
		Example: `  kubectl -n dexaflow port-forward pod/cp-0 9091:9091 &
  hotcert inspect 127.0.0.1:9091 --server-name cp.dexaflow.svc --ca-file new-ca.crt
  hotcert inspect 127.0.0.1:9091 -o json | jq -r .certificate.serial`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			asJSON, err := outputFormat(output)
			if err != nil {
				return err
			}
			opts.Address = args[0]
			for _, p := range strings.Split(alpn, ",") {
				if p = strings.TrimSpace(p); p != "" {
					opts.NextProtos = append(opts.NextProtos, p)
				}
			}
			return runInspect(cmd.Context(), g, opts, asJSON)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.ServerName, "server-name", "", "name sent as SNI and checked against the certificate (default: the host of ADDR; no SNI for an IP)")
	fl.StringVar(&opts.CAFile, "ca-file", "", "CA bundle to verify the served chain against, CA by CA")
	fl.DurationVar(&opts.Timeout, "timeout", 10*time.Second, "bound on dial and handshake")
	fl.StringVar(&alpn, "alpn", "h2", "comma-separated ALPN protocols to offer")
	fl.StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

func runInspect(ctx context.Context, g *globals, opts inspect.RemoteOptions, asJSON bool) error {
	if _, err := g.logger(); err != nil {
		return err
	}
	rep, err := inspect.Remote(ctx, opts)
	if err != nil {
		return err
	}
	if asJSON {
		err = writeJSON(g.stdout, rep)
	} else {
		err = inspect.WriteRemote(g.stdout, rep, time.Now())
	}
	if err != nil {
		return err
	}
	if rep.Bundle != nil && !rep.Bundle.Verified {
		why := "no CA in the bundle verifies the served chain"
		if !rep.Hostname.OK {
			why = fmt.Sprintf("the certificate does not name %s", rep.VerifyName)
		}
		return fmt.Errorf("%s (serial %s, issuer %s): %s: an agent with %s would refuse it", opts.Address, rep.Certificate.Serial, rep.Certificate.Issuer, why, opts.CAFile)
	}
	return nil
}
