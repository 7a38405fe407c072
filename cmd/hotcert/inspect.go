package main

import (
	"context"
	"errors"
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
		wait   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "inspect ADDR [--server-name N] [--ca-file F] [-o json]",
		Short: "Show the certificate a replica serves and whether a CA bundle verifies it",
		Long: `Dial one replica (a pod, not a load-balanced Service) with ALPN h2, as a gRPC
client does, and print the certificate it serves: subject, issuer, serial, SANs,
validity, SHA-256 fingerprint (openssl's format), the negotiated ALPN, and the chain.

The report always says whether the certificate names the server name. With
--ca-file, every CA of the bundle is also tried on its own: the report says, per CA,
whether the served chain verifies. The chain is fetched without verification and
verified explicitly, so a replica no agent would accept is still shown. The exit
status is non-zero when the certificate does not name the server name, when no CA
of the bundle verifies the replica (what an agent with that bundle would refuse), or
when the replica cannot be reached. Without --ca-file the chain is not verified.

Before removing the old CA (step 3 of a CA rotation), run it against every replica
with a bundle holding only the new CA. With --wait it looks again until the replica
passes (or the time is up), e.g. to wait for a replica to pick up its renewed Secret.`,
		Example: `  kubectl -n dexaflow port-forward pod/cp-0 9091:9091 &
  hotcert inspect 127.0.0.1:9091 --server-name cp.dexaflow.svc --ca-file new-ca.crt
  hotcert inspect 127.0.0.1:9091 -o json | jq -r .certificate.serial`,
		Args: cobra.MaximumNArgs(1), // a missing address is reported by RunE, in words (and as JSON with -o json)
		RunE: func(cmd *cobra.Command, args []string) error {
			asJSON, err := outputFormat(output)
			if err != nil {
				return err
			}
			if len(args) == 0 {
				return errors.New("inspect needs the address of one replica: hotcert inspect HOST:PORT, e.g. hotcert inspect 127.0.0.1:9091 --ca-file ca.crt")
			}
			opts.Address = args[0]
			for _, p := range strings.Split(alpn, ",") {
				if p = strings.TrimSpace(p); p != "" {
					opts.NextProtos = append(opts.NextProtos, p)
				}
			}
			return runInspect(cmd.Context(), g, opts, wait, asJSON)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.ServerName, "server-name", "", "name sent as SNI and checked against the certificate (default: the host of ADDR; no SNI for an IP)")
	fl.StringVar(&opts.CAFile, "ca-file", "", "CA bundle to verify the served chain against, CA by CA")
	fl.DurationVar(&opts.Timeout, "timeout", 10*time.Second, "bound on dial and handshake")
	fl.StringVar(&alpn, "alpn", "h2", "comma-separated ALPN protocols to offer")
	fl.DurationVar(&wait, "wait", 0, "until an agent would accept the replica, inspect it again every 200ms for up to this long (0: once); the report is the last one")
	fl.StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

func runInspect(ctx context.Context, g *globals, opts inspect.RemoteOptions, wait time.Duration, asJSON bool) error {
	if _, err := g.logger(); err != nil {
		return err
	}
	rep, verr, err := inspectUntil(ctx, opts, wait)
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
	if asJSON {
		return reported(verr)
	}
	return verr
}

// inspectUntil inspects the replica, and with wait > 0 inspects it again every
// waitPoll until an agent would accept it (reachable, the name matches, the bundle
// verifies) or wait has passed: a runbook step that waits for a replica to pick up
// its renewed Secret. It returns the last report and its verdict.
func inspectUntil(ctx context.Context, opts inspect.RemoteOptions, wait time.Duration) (*inspect.RemoteReport, error, error) {
	deadline := time.Now().Add(wait)
	for {
		rep, err := inspect.Remote(ctx, opts)
		var verr error
		if err == nil {
			verr = remoteVerdict(opts, rep)
		}
		if (err == nil && verr == nil) || wait <= 0 || time.Now().After(deadline) {
			return rep, verr, err
		}
		select {
		case <-ctx.Done():
			return rep, verr, err
		case <-time.After(waitPoll):
		}
	}
}

// waitPoll is how often inspect --wait looks again.
const waitPoll = 200 * time.Millisecond

// remoteVerdict is the error inspect exits with when an agent would refuse what the
// replica serves: a certificate that does not name the server name (whatever the
// bundle), or a chain no CA of --ca-file verifies.
func remoteVerdict(opts inspect.RemoteOptions, rep *inspect.RemoteReport) error {
	served := fmt.Sprintf("%s (serial %s, issuer %s)", opts.Address, rep.Certificate.Serial, rep.Certificate.Issuer)
	switch {
	case !rep.Hostname.OK:
		return fmt.Errorf("%s: the certificate does not name %s (it names %s): an agent dialing %s would refuse it; --server-name sets the name to check",
			served, rep.VerifyName, rep.Certificate.SANs(), rep.VerifyName)
	case rep.Bundle != nil && !rep.Bundle.Verified:
		return fmt.Errorf("%s: no CA in the bundle verifies the served chain: an agent with %s would refuse it", served, opts.CAFile)
	}
	return nil
}
