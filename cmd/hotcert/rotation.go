package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/hotcert/hotcert/cmd/hotcert/internal/rotation"
)

func newRotationCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rotation",
		Short: "Follow a CA rotation: where it stands and whether its next step is safe",
	}
	cmd.AddCommand(newRotationStatusCommand(g))
	return cmd
}

func newRotationStatusCommand(g *globals) *cobra.Command {
	var (
		opts               rotation.Options
		addrs, statusURLs  []string
		statusPort, output string
		slicesFile         string
		portName           string
		wait               rotation.WaitOptions
		revokedSerial      string
		revokedIssuer      string
	)
	cmd := &cobra.Command{
		Use:   "status --replica HOST:PORT... (--status-url URL... | --status-port P) --old-ca-file F --new-ca-file F [--wait STEP --timeout D] [-o json]",
		Short: "Say where a CA rotation stands and whether its next step is safe, naming the stragglers",
		Long: `Look at every control plane replica: what it serves, with a real TLS handshake as
an agent makes it, and what its connected agents trust, from its status endpoint's
fleet view (agents report their CA bundle over their stream). Then give the verdict
on each step of the rotation from --old-ca-file to --new-ca-file:

  add-new-ca          add the new CA to every agent's bundle (always safe)
  switch-server-cert  switch the replicas to a leaf issued by the new CA
                      (safe once every agent trusts the new CA)
  remove-old-ca       remove the old CA from the bundles
                      (safe once every replica serves a leaf of the new CA)

Stragglers are named: an agent whose bundle lacks the new CA, an agent of an older
release that reads its bundle only at start, an agent that departed (its stream
closed) and is not back yet, a replica still serving the old leaf, a replica that
cannot be reached. A fleet emptied for a moment proves nothing: replicas keep
departed agents for a declared time (hotcert server --fleet-remember, 1m), and
each counts as not proven until it is back or that time has passed; at least
--min-agents (default 1; give the fleet's size) must be connected.

Replicas are given by address (pods, not a load-balanced Service), or read from the
Service's EndpointSlices as kubectl prints them (--endpointslices FILE, - for stdin;
this binary links no Kubernetes client, kubectl does the reading). Give each
replica's status endpoint with --status-url (one per --replica, in order) or
--status-port (same host).

With --wait STEP it looks again every --interval until STEP is safe (exit 0) or
--timeout has passed (exit 1, naming the stragglers); --wait complete waits for
every step to be done. Between looks it remembers the agents it saw, so one that a
restarted replica no longer lists still counts as departed. See docs/rotation.md.

With --revoked-serial HEX it asks every replica instead whether the deny list it
enforces revokes that serial and whether a connection of it is left. For every pod
of a cluster, whatever it runs, the census of hotcert-controller answers the same
question in a TrustRotation's RevocationEnforced condition (docs/census.md).`,
		Example: `  hotcert rotation status --replica 10.0.0.7:9091 --replica 10.0.0.8:9091 --status-port 9090 \
    --server-name cp.dexaflow.svc --old-ca-file ca-2025.crt --new-ca-file ca-2026.crt
  kubectl get endpointslices -n dexaflow -l kubernetes.io/service-name=control-plane -o json |
    hotcert rotation status --endpointslices - --port-name grpc --status-port 9090 \
    --server-name cp.dexaflow.svc --old-ca-file ca-2025.crt --new-ca-file ca-2026.crt
  hotcert rotation status ... --wait switch-server-cert --timeout 10m -o json
  hotcert rotation status ... --wait complete --timeout 30m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			asJSON, err := outputFormat(output)
			if err != nil {
				return err
			}
			if _, err := g.logger(); err != nil {
				return err
			}
			if slicesFile != "" {
				found, err := replicasFromEndpointSlices(cmd.InOrStdin(), slicesFile, portName)
				if err != nil {
					return err
				}
				addrs = append(addrs, found...)
			}
			if opts.Replicas, err = rotation.ReplicasFrom(addrs, statusURLs, statusPort); err != nil {
				return err
			}
			if revokedSerial != "" {
				return runRevocationStatus(cmd.Context(), g, opts, revokedSerial, revokedIssuer, wait.Step, asJSON)
			}
			if revokedIssuer != "" {
				return errors.New("--revoked-issuer names the issuer of --revoked-serial: give both")
			}
			return runRotationStatus(cmd.Context(), g, opts, wait, asJSON)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVar(&addrs, "replica", nil, "HOST:PORT of one replica's gRPC listener (repeat for every replica)")
	fl.StringVar(&slicesFile, "endpointslices", "", "read the replicas from this file of EndpointSlices (kubectl get endpointslices -l kubernetes.io/service-name=NAME -o json; - for stdin)")
	fl.StringVar(&portName, "port-name", "", "with --endpointslices, the name of the gRPC port (default: the slices' only port)")
	fl.StringArrayVar(&statusURLs, "status-url", nil, "status endpoint of the replica of the same position, e.g. http://10.0.0.7:9090/healthz")
	fl.StringVar(&statusPort, "status-port", "", "port of every replica's status endpoint on the replica's host (http://HOST:PORT/healthz)")
	fl.StringVar(&opts.OldCAFile, "old-ca-file", "", "the CA being retired (PEM)")
	fl.StringVar(&opts.NewCAFile, "new-ca-file", "", "the CA replacing it (PEM)")
	fl.StringVar(&opts.ServerName, "server-name", "", "name the served certificate must match, sent as SNI (default: the host of each replica)")
	fl.DurationVar(&opts.Timeout, "probe-timeout", 5*time.Second, "bound on each handshake and each status read")
	fl.IntVar(&opts.MinAgents, "min-agents", 1, "the first step is done only when at least this many agents are connected and report (an empty fleet proves nothing; set your fleet size or a floor; 0 for a control plane without agents)")
	fl.StringVar(&wait.Step, "wait", "", "wait until this step is safe (add-new-ca, switch-server-cert or remove-old-ca), or until the rotation is complete (complete)")
	fl.DurationVar(&wait.Timeout, "timeout", 10*time.Minute, "with --wait, give up after this long")
	fl.DurationVar(&wait.Interval, "interval", 2*time.Second, "with --wait, look again this often")
	fl.StringVar(&revokedSerial, "revoked-serial", "", "instead of a CA rotation, say whether every replica refuses this serial (hex) and no connection of it is left (exit 1 otherwise; docs/revocation.md)")
	fl.StringVar(&revokedIssuer, "revoked-issuer", "", "with --revoked-serial: the SHA-256 fingerprint of the CA that issued it (a serial is unique only per issuer; without it, any issuer's serial counts)")
	fl.StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

func runRotationStatus(ctx context.Context, g *globals, opts rotation.Options, wait rotation.WaitOptions, asJSON bool) error {
	var rep *rotation.Report
	var verr, err error
	if wait.Step == "" {
		rep, err = rotation.Check(ctx, opts)
	} else {
		rep, verr = rotation.Wait(ctx, opts, wait)
		if rep == nil {
			err = verr
		}
	}
	if err != nil {
		return err
	}
	if asJSON {
		if err := writeJSON(g.stdout, rep); err != nil {
			return err
		}
		return reported(verr)
	}
	if err := rotation.WriteText(g.stdout, rep); err != nil {
		return err
	}
	return verr
}

// runRevocationStatus prints whether every replica refuses serial with no
// connection of it left, and exits non-zero when not.
func runRevocationStatus(ctx context.Context, g *globals, opts rotation.Options, serial, issuer, waitStep string, asJSON bool) error {
	if opts.OldCAFile != "" || opts.NewCAFile != "" || waitStep != "" {
		return errors.New("--revoked-serial asks about a revocation, not a CA rotation: drop --old-ca-file, --new-ca-file and --wait")
	}
	rep, err := rotation.CheckRevocation(ctx, opts, serial, issuer)
	if err != nil {
		return err
	}
	var verr error
	if !rep.Done {
		verr = errors.New(rep.Summary)
	}
	if asJSON {
		if err := writeJSON(g.stdout, rep); err != nil {
			return err
		}
		return reported(verr)
	}
	if err := rotation.WriteRevocationText(g.stdout, rep); err != nil {
		return err
	}
	return verr
}

// replicasFromEndpointSlices reads the replicas' addresses from the EndpointSlices
// in file (- for in).
func replicasFromEndpointSlices(in io.Reader, file, portName string) ([]string, error) {
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return nil, fmt.Errorf("--endpointslices: %w", err)
		}
		defer f.Close()
		in = f
	}
	addrs, err := rotation.AddressesFromEndpointSlices(in, portName)
	if err != nil {
		return nil, fmt.Errorf("--endpointslices %s: %w", file, err)
	}
	return addrs, nil
}
