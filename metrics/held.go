package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotcert/hotcert"
)

// held exports what each component holds, for rotation readiness:
//
//	hotcert_tls_cert_info{component,sha256,serial,issuer}     1, one series per component with a leaf
//	hotcert_tls_ca_certificate_info{component,sha256,subject} 1, one series per CA of the bundle
//
// A swap deletes the previous material's series before it sets the new ones, so a
// component never has more series than its material has certificates.
type held struct {
	leaf *prometheus.GaugeVec
	cas  *prometheus.GaugeVec

	mu   sync.Mutex
	last map[string]heldSeries // component → the label values of its series
}

// heldSeries are the label values of one component's series.
type heldSeries struct {
	leaf []string   // nil without a leaf
	cas  [][]string // one per CA of the bundle
}

func newHeld(n Naming) *held {
	return &held{
		leaf: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: n.Name("tls_cert_info"),
			Help: "The leaf certificate in use (value 1): SHA-256 fingerprint, serial as openssl prints it, issuer.",
		}, []string{n.label, "sha256", "serial", "issuer"}),
		cas: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: n.Name("tls_ca_certificate_info"),
			Help: "One series (value 1) per CA of the trust bundle in use: SHA-256 fingerprint and subject.",
		}, []string{n.label, "sha256", "subject"}),
		last: make(map[string]heldSeries),
	}
}

func (h *held) collectors() []prometheus.Collector { return []prometheus.Collector{h.leaf, h.cas} }

// observe replaces the component's series by those of m.
func (h *held) observe(component string, m *hotcert.Material) {
	s := m.Summary()
	h.mu.Lock()
	defer h.mu.Unlock()
	prev := h.last[component]
	if prev.leaf != nil {
		h.leaf.DeleteLabelValues(prev.leaf...)
	}
	for _, lv := range prev.cas {
		h.cas.DeleteLabelValues(lv...)
	}
	var now heldSeries
	if l := s.Leaf; l != nil {
		now.leaf = []string{component, l.SHA256, l.Serial, l.Issuer}
		h.leaf.WithLabelValues(now.leaf...).Set(1)
	}
	for _, ca := range s.CAs {
		lv := []string{component, ca.SHA256, ca.Subject}
		h.cas.WithLabelValues(lv...).Set(1)
		now.cas = append(now.cas, lv)
	}
	h.last[component] = now
}
