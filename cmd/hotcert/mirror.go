package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/mirroring"
	"github.com/hotcert/hotcert/metrics"
)

type mirrorFlags struct {
	certFile, keyFile, bundleFile, caFile string
	out, passwordFile, keyMode            string
	metricsAddr                           string
	pollInterval, settle                  time.Duration
	metricsPrefix, metricsLbl             string
}

func newMirrorCommand(g *globals) *cobra.Command {
	f := &mirrorFlags{}
	cmd := &cobra.Command{
		Use:   "mirror --out DIR (--cert-file F --key-file F | --credential-bundle-file F) [--ca-file F] [--pkcs12-password-file F]",
		Short: "Mirror validated certificates into a plain directory, for programs that watch files",
		Long: `Mirror the certificate, key and CA bundle into a plain directory, rewritten on
every change, for programs that reload files but miss the kubelet's "..data"
symlink swap (Spring Boot SSL bundles, JVM programs reading PKCS#12 keystores).

The inputs are followed and validated as by every hotcert process; only material
that validated reaches --out. Content that does not is refused: the last good
files stay, "TLS certificate reload failed" is logged and
hotcert_tls_reload_failures_total{component="mirror"} counts once. --out gets
tls.crt, tls.key and ca.crt (PEM) and, with --pkcs12-password-file, keystore.p12
and truststore.p12 (PKCS#12, the password re-read when its file changes). Each file
is written to a temporary file in --out, synced and renamed over its name, so a
file watcher sees an event naming it. tls.key and keystore.p12 are mode 0600
(--key-file-mode). A missing or invalid input at startup is a startup error.`,
		Example: `  hotcert mirror --cert-file /tls/tls.crt --key-file /tls/tls.key --ca-file /tls/ca.crt --out /mirror
  hotcert mirror --cert-file /tls/tls.crt --key-file /tls/tls.key --ca-file /ca/ca.crt \
    --pkcs12-password-file /keystore-password/password --out /mirror --metrics-bind-address :9090`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runMirror(cmd.Context(), g, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.certFile, "cert-file", "", "certificate chain file (PEM, leaf first)")
	fl.StringVar(&f.keyFile, "key-file", "", "private key file (PEM)")
	fl.StringVar(&f.bundleFile, "credential-bundle-file", "", "private key and chain in one PEM file (a podCertificate volume's credential bundle), instead of --cert-file and --key-file")
	fl.StringVar(&f.caFile, "ca-file", "", "CA bundle file (PEM)")
	fl.StringVar(&f.out, "out", "", "directory to write the files to (required; created if missing)")
	fl.StringVar(&f.passwordFile, "pkcs12-password-file", "", "also write keystore.p12 and truststore.p12, with the password this file holds (one trailing newline is dropped)")
	fl.StringVar(&f.keyMode, "key-file-mode", "0600", "mode of tls.key and keystore.p12 (octal; 0640 with a group the reading program shares)")
	fl.StringVar(&f.metricsAddr, "metrics-bind-address", "", "serve /metrics and /healthz on this address (off when empty)")
	fl.DurationVar(&f.pollInterval, "poll-interval", hotcert.DefaultPollInterval, "re-read the inputs this often even without a file event")
	fl.DurationVar(&f.settle, "settle", hotcert.DefaultSettle, "how long an input that does not load is treated as mid-write before it counts as a failure")
	fl.StringVar(&f.metricsPrefix, "metrics-prefix", "hotcert", "prefix of the TLS reload and mirror metrics")
	fl.StringVar(&f.metricsLbl, "metrics-component-label", "component", "label carrying the component in the metrics")
	return cmd
}

func runMirror(ctx context.Context, g *globals, f *mirrorFlags) error {
	log, err := g.logger()
	if err != nil {
		return err
	}
	switch {
	case f.out == "":
		return errors.New("--out is required: the directory the program reads its certificates from")
	case (f.certFile == "") != (f.keyFile == ""):
		return errors.New("--cert-file and --key-file go together: the certificate chain and its key")
	case f.certFile != "" && f.bundleFile != "":
		return errors.New("--cert-file/--key-file and --credential-bundle-file both give the identity: give one of them")
	case f.certFile == "" && f.bundleFile == "" && f.caFile == "":
		return errors.New("nothing to mirror: give --cert-file and --key-file, --credential-bundle-file, --ca-file, or an identity and --ca-file")
	}
	mode, err := strconv.ParseUint(f.keyMode, 8, 32)
	if err != nil || mode > 0o777 || mode == 0 {
		return fmt.Errorf("--key-file-mode %q: want permission bits in octal, e.g. 0600 or 0640", f.keyMode)
	}
	reg := newProcessRegistry()
	cfg := mirroring.Config{
		CertFile: f.certFile, KeyFile: f.keyFile, CredentialBundle: f.bundleFile, CAFile: f.caFile,
		Dir: f.out, PasswordFile: f.passwordFile, KeyFileMode: fs.FileMode(mode), Logger: log, Registerer: reg,
		MetricsOptions: []metrics.Option{metrics.WithPrefix(f.metricsPrefix), metrics.WithComponentLabel(f.metricsLbl)},
		ReloadOptions: []hotcert.ReloadOption{hotcert.WithPollInterval(f.pollInterval), hotcert.WithSettle(f.settle),
			hotcert.WithComponentLabel(f.metricsLbl)}, // one key in logs and metrics
	}
	p, err := mirroring.New(ctx, cfg)
	if err != nil {
		return inUserTerms(err, fileFlags("--cert-file", f.certFile, "--key-file", f.keyFile, "--credential-bundle-file", f.bundleFile,
			"--ca-file", f.caFile, "--pkcs12-password-file", f.passwordFile))
	}
	defer p.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wait := func() {}
	if f.metricsAddr != "" {
		if wait, err = serveObservability(ctx, f.metricsAddr, reg, p.HealthHandler(), log); err != nil {
			return err
		}
	}
	st := p.Status()
	log.Info("mirroring", "out", f.out, "files", st.Mirror.Files, "pkcs12", f.passwordFile != "")
	err = p.Run(ctx)
	cancel()
	wait()
	return err
}
