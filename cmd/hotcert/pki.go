package main

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hotcert/hotcert/cmd/hotcert/internal/inspect"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/pki"
	"github.com/hotcert/hotcert/hotcerttest"
)

func newPKICommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pki",
		Short: "Make test TLS material: a CA, server and client certificates, CA bundles, as kubelet-style volumes",
		Long: `Make the TLS material the other commands, the docs and the runbook need, with no
openssl: a CA (ca.crt, ca.key in a directory), certificates it issues with the names,
usages and validity you choose (expired and not yet valid included), and CA bundles.

Certificates and bundles are written as the kubelet writes a mounted Secret: the
files are symlinks into a timestamped directory behind ..data, and a new write
swaps ..data in one rename. Issuing into the same --out again is a rotation by
hand, seen by a running server or agent exactly as a Secret update.

For tests, demos and runbooks only: the keys are written unencrypted.`,
		Example: `  hotcert pki ca --dir pki/ca-2026 --name "example CA 2026"
  hotcert pki issue --ca-dir pki/ca-2026 --out tls --name cp --dns localhost,cp.example.svc --ip 127.0.0.1
  hotcert pki issue --ca-dir pki/ca-2026 --out agent-tls --name agent-1 --usage client
  hotcert pki issue --ca-dir pki/ca-2026 --out expired --valid-from=-48h --validity 24h
  hotcert pki bundle --out agent-ca --ca-dir pki/ca-2025 --ca-dir pki/ca-2026`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newPKICACommand(g), newPKIIssueCommand(g), newPKIBundleCommand(g))
	return cmd
}

func newPKICACommand(g *globals) *cobra.Command {
	var (
		dir, name string
		validity  time.Duration
		force     bool
	)
	cmd := &cobra.Command{
		Use:   "ca --dir DIR [--name CN] [--validity D]",
		Short: "Create a root CA in DIR (ca.crt, ca.key)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return errors.New("--dir is required: the directory the CA is kept in (ca.crt, ca.key)")
			}
			if validity <= 0 {
				return fmt.Errorf("--validity %s: want a positive duration", validity)
			}
			opts := []hotcerttest.Option{hotcerttest.WithLifetime(validity)}
			if name != "" {
				opts = append(opts, hotcerttest.WithCommonName(name))
			}
			ca, err := pki.NewCA(dir, force, opts...)
			if err != nil {
				return fmt.Errorf("--dir %s: %w", dir, err)
			}
			d := inspect.Describe(ca.Cert)
			_, err = fmt.Fprintf(g.stdout, "CA %s: serial %s, sha256 %s, valid until %s: %s, %s\n",
				d.Subject, d.Serial, d.SHA256, d.NotAfter.Format(time.RFC3339), filepath.Join(dir, pki.CACertName), filepath.Join(dir, pki.CAKeyName))
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&dir, "dir", "", "directory to keep the CA in (ca.crt, ca.key; created)")
	fl.StringVar(&name, "name", "", `common name (default "hotcert test CA <random>")`)
	fl.DurationVar(&validity, "validity", 10*365*24*time.Hour, "lifetime, from one minute ago")
	fl.BoolVar(&force, "force", false, "replace a CA already in --dir")
	return cmd
}

func newPKIIssueCommand(g *globals) *cobra.Command {
	var (
		caDir, out, name, usage, validFrom string
		dns, ips                           []string
		validity                           time.Duration
	)
	cmd := &cobra.Command{
		Use:   "issue --ca-dir DIR --out DIR [--name CN] [--dns N,...] [--ip A,...] [--usage server|client|both] [--valid-from T] [--validity D]",
		Short: "Issue a certificate into a kubelet-style volume (tls.crt, tls.key, ca.crt); again into the same --out rotates it",
		Long: `Issue a certificate with the CA of --ca-dir and write it to the volume --out:
tls.crt (the certificate), tls.key (its key) and ca.crt (the issuing CA), swapped
in together as the kubelet does. Without --dns and --ip the certificate names
localhost, 127.0.0.1 and ::1.

--valid-from is when the certificate starts: a duration from now (-1m, 2h,
-48h) or an RFC 3339 time. With --validity it makes expired certificates
(--valid-from=-48h --validity 24h) and not yet valid ones (--valid-from 1h).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case caDir == "":
				return errors.New("--ca-dir is required: the directory of a CA made with hotcert pki ca")
			case out == "":
				return errors.New("--out is required: the volume directory to write tls.crt, tls.key and ca.crt into")
			case validity <= 0:
				return fmt.Errorf("--validity %s: want a positive duration", validity)
			}
			eku, ok := pki.Usages[usage]
			if !ok {
				return fmt.Errorf("--usage %q: want server, client or both", usage)
			}
			from, err := parseValidFrom(validFrom, time.Now())
			if err != nil {
				return err
			}
			opts := []hotcerttest.Option{hotcerttest.WithExtKeyUsages(eku...), hotcerttest.WithValidity(from, from.Add(validity))}
			if name != "" {
				opts = append(opts, hotcerttest.WithCommonName(name))
			}
			if cmd.Flags().Changed("dns") || cmd.Flags().Changed("ip") {
				addrs := make([]net.IP, 0, len(ips))
				for _, s := range ips {
					ip := net.ParseIP(s)
					if ip == nil {
						return fmt.Errorf("--ip %q: not an IP address", s)
					}
					addrs = append(addrs, ip)
				}
				opts = append(opts, hotcerttest.WithDNSNames(dns...), hotcerttest.WithIPAddresses(addrs...))
			}
			ca, err := pki.LoadCA(caDir)
			if err != nil {
				return fmt.Errorf("--ca-dir %s: %w", caDir, err)
			}
			leaf, err := pki.Issue(ca, out, opts...)
			if err != nil {
				return fmt.Errorf("--out %s: %w", out, err)
			}
			d := inspect.Describe(leaf.Cert)
			_, err = fmt.Fprintf(g.stdout, "issued %s: serial %s, %s, %s usage, %s, by %s: %s (tls.crt, tls.key, ca.crt)\n",
				d.Subject, d.Serial, d.SANs(), usage, d.Validity(time.Now()), d.Issuer, out)
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&caDir, "ca-dir", "", "directory of the issuing CA (from hotcert pki ca)")
	fl.StringVar(&out, "out", "", "volume directory to write tls.crt, tls.key and ca.crt into (created)")
	fl.StringVar(&name, "name", "", `common name (default "localhost")`)
	fl.StringSliceVar(&dns, "dns", nil, "DNS names (comma-separated or repeated)")
	fl.StringSliceVar(&ips, "ip", nil, "IP addresses (comma-separated or repeated)")
	fl.StringVar(&usage, "usage", "server", "extended key usage: server, client or both")
	fl.StringVar(&validFrom, "valid-from", "-1m", "start of validity: a duration from now (-48h, 1h) or an RFC 3339 time")
	fl.DurationVar(&validity, "validity", 24*time.Hour, "lifetime from --valid-from")
	return cmd
}

// parseValidFrom reads --valid-from: a duration from now or an RFC 3339 time.
func parseValidFrom(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(d), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("--valid-from %q: want a duration from now (-48h, 1h) or an RFC 3339 time", s)
}

func newPKIBundleCommand(g *globals) *cobra.Command {
	var (
		out    string
		caDirs []string
	)
	cmd := &cobra.Command{
		Use:   "bundle --out DIR --ca-dir DIR [--ca-dir DIR ...]",
		Short: "Write the CAs of the --ca-dir directories, in order, as ca.crt of a kubelet-style volume",
		Long: `Write a CA bundle (the certificates of the given CAs, in order) as ca.crt of the
volume --out, swapped in as the kubelet does: the union bundle of a CA rotation is
two --ca-dir, the last step one.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" || len(caDirs) == 0 {
				return errors.New("--out and at least one --ca-dir are required")
			}
			cas := make([]*hotcerttest.CA, 0, len(caDirs))
			names := make([]string, 0, len(caDirs))
			for _, dir := range caDirs {
				ca, err := pki.LoadCA(dir)
				if err != nil {
					return fmt.Errorf("--ca-dir %s: %w", dir, err)
				}
				cas = append(cas, ca)
				names = append(names, ca.Cert.Subject.String())
			}
			if err := pki.Bundle(out, cas...); err != nil {
				return fmt.Errorf("--out %s: %w", out, err)
			}
			_, err := fmt.Fprintf(g.stdout, "bundle of %d CA(s) (%s): %s\n", len(cas), strings.Join(names, "; "), filepath.Join(out, pki.CACertName))
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&out, "out", "", "volume directory to write ca.crt into (created)")
	fl.StringSliceVar(&caDirs, "ca-dir", nil, "a CA directory (from hotcert pki ca); repeat for a union bundle")
	return cmd
}
