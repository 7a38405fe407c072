package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/source/spiffe"
)

// spiffeFlags are hotcert proxy's SPIFFE Workload API source: the X.509-SVID is
// the proxy's certificate and the X.509 bundle of its trust domain its trust,
// both from one reloader.
type spiffeFlags struct {
	socket string
	wait   time.Duration
}

func (f *spiffeFlags) add(fl *pflag.FlagSet) {
	fl.StringVar(&f.socket, "spiffe-socket", "", "take the certificate (the X.509-SVID) and the CA bundle (the trust domain's X.509 bundle) from the SPIFFE Workload API at this address, e.g. unix:///run/spire/agent.sock, instead of --cert-file/--key-file, --credential-bundle and --ca-file")
	fl.DurationVar(&f.wait, "spiffe-initial-wait", time.Minute, "with --spiffe-socket: how long to wait at start for the agent to answer and issue the SVID")
}

// check refuses a SPIFFE source combined with files: one source gives the
// identity and the trust.
func (f *spiffeFlags) check(p *proxyFlags) error {
	switch {
	case f.socket == "":
		return nil
	case !strings.HasPrefix(f.socket, "unix://") && !strings.HasPrefix(f.socket, "tcp://"):
		return fmt.Errorf("--spiffe-socket %q: want unix:///path/to/agent.sock (or tcp://host:port)", f.socket)
	case len(p.certFiles)+len(p.keyFiles)+len(p.bundles) > 0 || p.caFile != "":
		return errors.New("--spiffe-socket gives the certificate and the CA bundle: leave out --cert-file, --key-file, --credential-bundle and --ca-file")
	case f.wait <= 0:
		return errors.New("--spiffe-initial-wait: want a duration above 0")
	}
	return nil
}

// followSPIFFE loads the workload's X.509 context from the Workload API, as
// every source is loaded: validated before it is served (a certificate, a bundle,
// a chain to that bundle), the last good one kept when an update does not
// validate or the agent goes away. The agent pushes updates; nothing is polled.
func (rs *proxyReloaders) followSPIFFE(ctx context.Context) (*hotcert.Reloader, error) {
	f := rs.f
	src, err := spiffe.New(ctx, spiffe.WithAddr(f.spiffe.socket))
	if err != nil {
		return nil, fmt.Errorf("--spiffe-socket: %w", err)
	}
	r, err := hotcert.New(ctx, src, hotcert.WithComponent(f.component), hotcert.WithComponentLabel(f.metricsLbl),
		hotcert.WithLogger(rs.log), hotcert.WithObserver(rs.rec),
		hotcert.WithInitialWait(f.spiffe.wait), hotcert.WithPollInterval(0), hotcert.WithSettle(0),
		hotcert.WithValidation(hotcert.WithRequireIdentity(), hotcert.WithRequireTrust(), hotcert.WithChainToOwnTrust()))
	if err != nil {
		src.Close()
		return nil, fmt.Errorf("--spiffe-socket %s: %w", f.spiffe.socket, err)
	}
	done := make(chan struct{})
	rs.dones = append(rs.dones, done)
	go func() {
		defer close(done)
		defer src.Close()
		if err := r.Start(ctx); err != nil && ctx.Err() == nil {
			rs.log.Error("proxy: following the source failed", "source", src.String(), "error", err.Error())
		}
	}()
	return r, nil
}
