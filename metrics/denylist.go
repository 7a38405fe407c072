package metrics

import (
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotcert/hotcert/revocation"
)

// DenyList exports a revocation.Reloader's outcomes: it is a revocation.Observer
// (pass it with revocation.WithObserver). Create it with [NewDenyList]. With the
// default names:
//
//	hotcert_tls_deny_list_reload_total{component,result}             loads by result, once per distinct content
//	hotcert_tls_deny_list_reload_failures_total{component}            lists refused (the last good one stays)
//	hotcert_tls_deny_list_last_reload_timestamp_seconds{component}    when the list in use was loaded
//	hotcert_tls_deny_list_info{component,version}                     1: the version of the list in use
//	hotcert_tls_deny_list_entries{component,kind="serial|spki"}       entries of the list in use
//	hotcert_tls_deny_list_crl_next_update_timestamp_seconds{component,issuer} each CRL's NextUpdate
//	hotcert_tls_deny_list_stale_crls_total{component}                 CRLs that went stale while in use
//	hotcert_tls_deny_list_denied_connections{component}               open connections the list in use denies (CountDenied)
type DenyList struct {
	reloads *Reloads
	info    *prometheus.GaugeVec
	entries *prometheus.GaugeVec
	next    *prometheus.GaugeVec
	stale   *prometheus.CounterVec
	denied  *deniedConns

	mu   sync.Mutex
	last map[string]denySeries // component → label values of its series
}

type denySeries struct {
	version string
	issuers []string
}

var _ revocation.Observer = (*DenyList)(nil)

// NewDenyList registers the series with reg (nil skips registration), named by the
// options a process passes to [New].
func NewDenyList(reg prometheus.Registerer, opts ...Option) (*DenyList, error) {
	n, err := NewNaming(opts...)
	if err != nil {
		return nil, err
	}
	d := &DenyList{
		reloads: NewReloads(n, ReloadSeries{
			Total: "tls_deny_list_reload_total", TotalHelp: "Deny-list loads by result, once per distinct content.",
			Failures: "tls_deny_list_reload_failures_total", FailuresHelp: "Deny lists refused (garbage, forged or stale CRL); the last good list stays in use.",
			LastReload: "tls_deny_list_last_reload_timestamp_seconds", LastReloadHelp: "When the deny list in use was loaded.",
		}),
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: n.Name("tls_deny_list_info"),
			Help: "The deny list in use (value 1): its version, the first 16 hex digits of the SHA-256 of its content."}, []string{n.label, "version"}),
		entries: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: n.Name("tls_deny_list_entries"),
			Help: "Entries of the deny list in use, by kind: serial (deny list and CRLs) or spki."}, []string{n.label, "kind"}),
		next: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: n.Name("tls_deny_list_crl_next_update_timestamp_seconds"),
			Help: "NextUpdate of each CRL in use, by issuer (0: none); a CRL is stale once time() passes it."}, []string{n.label, "issuer"}),
		stale: prometheus.NewCounterVec(prometheus.CounterOpts{Name: n.Name("tls_deny_list_stale_crls_total"),
			Help: "CRLs that passed their NextUpdate while in use."}, []string{n.label}),
		denied: newDeniedConns(n),
		last:   map[string]denySeries{},
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{d.reloads, d.info, d.entries, d.next, d.stale, d.denied} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("metrics: register deny-list metrics: %w", err)
			}
		}
	}
	return d, nil
}

// ObserveLoad implements revocation.Observer.
func (d *DenyList) ObserveLoad(component string, l *revocation.List, initial bool) {
	in := l.Info()
	d.reloads.Loaded(component, in.LoadedAt, initial)
	if initial {
		d.stale.WithLabelValues(component)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	prev := d.last[component]
	if prev.version != "" {
		d.info.DeleteLabelValues(component, prev.version)
	}
	for _, is := range prev.issuers {
		d.next.DeleteLabelValues(component, is)
	}
	now := denySeries{version: in.Version}
	d.info.WithLabelValues(component, in.Version).Set(1)
	d.entries.WithLabelValues(component, "serial").Set(float64(in.Serials))
	d.entries.WithLabelValues(component, "spki").Set(float64(in.SPKIs))
	for _, c := range in.CRLs {
		v := 0.0
		if !c.NextUpdate.IsZero() {
			v = float64(c.NextUpdate.Unix())
		}
		d.next.WithLabelValues(component, c.Issuer).Set(v)
		now.issuers = append(now.issuers, c.Issuer)
	}
	d.last[component] = now
}

// ObserveFailure implements revocation.Observer.
func (d *DenyList) ObserveFailure(component string, _ error) { d.reloads.Failed(component) }

// ObserveStale implements revocation.Observer.
func (d *DenyList) ObserveStale(component string, _ revocation.CRLInfo) {
	d.stale.WithLabelValues(component).Inc()
}
