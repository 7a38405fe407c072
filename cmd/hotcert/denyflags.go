package main

import (
	"fmt"
	"log/slog"

	"github.com/spf13/pflag"

	"github.com/hotcert/hotcert/revocation"
	"github.com/hotcert/hotcert/source/file"
)

// denyListFlags are the deny-list flags of hotcert server and hotcert agent: one
// name per concept across commands.
type denyListFlags struct {
	list, crl, stalePolicy string
}

// register adds --deny-list, --crl-file and --stale-crl-policy to fl; what
// completes "... whose certificate" in their help (who is refused).
func (d *denyListFlags) register(fl *pflag.FlagSet, what string) {
	fl.StringVar(&d.list, "deny-list", "", what+" this deny-list file revokes (serial and spki lines, docs/revocation.md; re-read like the certificates)")
	fl.StringVar(&d.crl, "crl-file", "", what+" these CRLs revoke (PEM or DER; each signed by a CA of --ca-file)")
	fl.StringVar(&d.stalePolicy, "stale-crl-policy", revocation.KeepEnforcing.String(), "once a CRL passes its NextUpdate: keep-enforcing (its entries stay refused, others get in) or refuse-all (every peer of its issuer is refused and cut)")
}

// source returns the deny-list source the flags name (nil without --deny-list
// and --crl-file) and the stale-CRL policy.
func (d *denyListFlags) source(log *slog.Logger) (revocation.Source, revocation.StalePolicy, error) {
	var policy revocation.StalePolicy
	switch d.stalePolicy {
	case revocation.KeepEnforcing.String():
		policy = revocation.KeepEnforcing
	case revocation.RefuseAll.String():
		policy = revocation.RefuseAll
	default:
		return nil, 0, fmt.Errorf("--stale-crl-policy %q: want keep-enforcing or refuse-all", d.stalePolicy)
	}
	if d.list == "" && d.crl == "" {
		return nil, policy, nil
	}
	src, err := revocation.Files(d.list, d.crl, file.WithLogger(log))
	if err != nil {
		return nil, 0, err
	}
	return src, policy, nil
}
