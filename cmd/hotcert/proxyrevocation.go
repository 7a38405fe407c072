package main

import (
	"context"
	"crypto/x509"
	"errors"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/agentrpc"
	"github.com/hotcert/hotcert/metrics"
	"github.com/hotcert/hotcert/proxy"
	"github.com/hotcert/hotcert/revocation"
)

// errProxyDenyWithoutCA refuses a server-side deny list without mTLS.
var errProxyDenyWithoutCA = errors.New("--deny-list and --crl-file need --ca-file: they revoke client certificates, which only mTLS asks for")

// loadDenyList loads and follows the deny list of --deny-list and --crl-file
// (nil without them), its CRLs verified against trust (the --ca-file bundle),
// as component COMPONENT_deny_list with the hotcert_tls_deny_list_* series,
// which countDenied completes.
func (rs *proxyReloaders) loadDenyList(ctx context.Context, trust hotcert.Provider, reg prometheus.Registerer, mopts []metrics.Option) (*revocation.Reloader, *metrics.DenyList, error) {
	f := rs.f
	src, policy, err := f.deny.source(rs.log)
	if err != nil || src == nil {
		return nil, nil, err
	}
	m, err := metrics.NewDenyList(reg, mopts...)
	if err != nil {
		return nil, nil, err
	}
	r, err := revocation.New(ctx, src, trust, hotcert.WithComponent(f.component+"_deny_list"), hotcert.WithComponentLabel(f.metricsLbl),
		hotcert.WithLogger(rs.log), hotcert.WithPollInterval(f.pollInterval), hotcert.WithSettle(f.settle),
		revocation.WithStalePolicy(policy), revocation.WithObserver(m))
	if err != nil {
		return nil, nil, inUserTerms(err, fileFlags("--deny-list", f.deny.list, "--crl-file", f.deny.crl))
	}
	done := make(chan struct{})
	rs.dones = append(rs.dones, done)
	go func() {
		defer close(done)
		if err := r.Start(ctx); err != nil && ctx.Err() == nil {
			rs.log.Error("proxy: following the deny list failed", "source", src.String(), "error", err.Error())
		}
	}()
	return r, m, nil
}

// countDenied exports, at each scrape, how many of p's open connections the
// list in use denies (hotcert_tls_deny_list_denied_connections, 0 once the
// live cut has run): what the census reads to prove no connection of a
// revoked certificate is left.
func countDenied(m *metrics.DenyList, component string, p proxyRunner, deny *revocation.Reloader) {
	var peers func(func([]*x509.Certificate) bool)
	switch p := p.(type) {
	case *proxy.Server:
		peers = p.Peers
	case *proxy.Client:
		peers = p.Peers
	}
	if m == nil || peers == nil {
		return
	}
	m.CountDenied(component+"_deny_list", func() int { return agentrpc.DeniedConnections(deny.Current(), peers) })
}

// proxyStatus is what the proxy's /healthz serves: the proxy's status and, with
// a deny list, the "deny_list" object of the reference server's /healthz (the
// version enforced, the open connections it denies; ?revoked_serial=HEX answers
// for one serial), which `hotcert rotation status --revoked-serial` reads.
func proxyStatus(p proxyRunner, deny *revocation.Reloader, r *http.Request) (any, error) {
	var (
		peers func(func([]*x509.Certificate) bool)
		st    any
	)
	switch p := p.(type) {
	case *proxy.Server:
		st, peers = p.Status(), p.Peers
	case *proxy.Client:
		st, peers = p.Status(), p.Peers
	}
	if deny == nil {
		return st, nil
	}
	dl, err := agentrpc.NewDenyListStatus(deny, r.URL.Query().Get("revoked_serial"), r.URL.Query().Get("revoked_issuer"), peers)
	if err != nil {
		return nil, err
	}
	switch st := st.(type) {
	case proxy.Status:
		return struct {
			proxy.Status
			DenyList *agentrpc.DenyListStatus `json:"deny_list"`
		}{st, dl}, nil
	default:
		return struct {
			proxy.ClientStatus
			DenyList *agentrpc.DenyListStatus `json:"deny_list"`
		}{st.(proxy.ClientStatus), dl}, nil
	}
}
