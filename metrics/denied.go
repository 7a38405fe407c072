package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// deniedConns is the collector of <prefix>_tls_deny_list_denied_connections: one
// series per component that CountDenied named, its value asked for at each
// scrape.
type deniedConns struct {
	desc *prometheus.Desc

	mu    sync.Mutex
	count map[string]func() int // component → its count
}

func newDeniedConns(n Naming) *deniedConns {
	return &deniedConns{desc: prometheus.NewDesc(n.Name("tls_deny_list_denied_connections"),
		"Open connections whose peer certificate chain the deny list in use denies, counted at the scrape: 0 once the live cut has closed them.",
		[]string{n.label}, nil), count: map[string]func() int{}}
}

func (d *deniedConns) Describe(ch chan<- *prometheus.Desc) { ch <- d.desc }

func (d *deniedConns) Collect(ch chan<- prometheus.Metric) {
	d.mu.Lock()
	counts := make(map[string]func() int, len(d.count))
	for c, f := range d.count {
		counts[c] = f
	}
	d.mu.Unlock()
	for c, f := range counts {
		ch <- prometheus.MustNewConstMetric(d.desc, prometheus.GaugeValue, float64(f()), c)
	}
}

// CountDenied exports, for component, how many open connections the deny list in
// use denies, as <prefix>_tls_deny_list_denied_connections{component}: denied is
// asked at each scrape (drain.Server.DeniedConns and drain.HTTPServer.DeniedConns
// with the reloader's current list are such counts). It is one series per
// component, whatever the number of connections or revoked certificates: with
// the list's version in <prefix>_tls_deny_list_info it answers "does this process
// refuse certificate X, and is no connection of it left?" for anyone who knows
// which versions list X. A nil denied stops exporting it.
func (d *DenyList) CountDenied(component string, denied func() int) {
	d.denied.mu.Lock()
	defer d.denied.mu.Unlock()
	if denied == nil {
		delete(d.denied.count, component)
		return
	}
	d.denied.count[component] = denied
}
