package census

import (
	"net/http"
	"testing"
)

// TestPrometheusClientOnlyForItsOrigin: the client with the Prometheus
// credentials queries only the configured Prometheus's origin; a
// TrustRotation naming any other URL gets the client without credentials.
func TestPrometheusClientOnlyForItsOrigin(t *testing.T) {
	plain, authed := &http.Client{}, &http.Client{}
	o := Options{HTTPClient: plain, PrometheusURL: "https://prometheus-k8s.monitoring.svc:9091", PrometheusClient: authed}
	for u, want := range map[string]*http.Client{
		"https://prometheus-k8s.monitoring.svc:9091":                         authed,
		"https://Prometheus-K8s.monitoring.svc:9091/":                        authed,
		"https://prometheus-k8s.monitoring.svc:9091/prometheus":              authed,
		"http://prometheus-k8s.monitoring.svc:9091":                          plain, // another scheme
		"https://prometheus-k8s.monitoring.svc":                              plain, // another port (443)
		"https://prometheus-k8s.monitoring.svc:9091.evil.example":            plain,
		"https://evil.example/?u=https://prometheus-k8s.monitoring.svc:9091": plain,
		"https://user@prometheus-k8s.monitoring.svc:9091":                    plain,
		"::": plain,
	} {
		if got := o.prometheusClient(u); got != want {
			t.Errorf("%s: the client with credentials %v, want %v", u, got == authed, want == authed)
		}
	}
	o = Options{HTTPClient: plain, PrometheusURL: "https://prom.example", PrometheusClient: authed}
	if o.prometheusClient("https://prom.example:443/api") != authed {
		t.Error("the default port of https is not 443")
	}
	if (Options{HTTPClient: plain}).prometheusClient("https://prom.example") != plain {
		t.Error("without a Prometheus client, not the plain one")
	}
}
