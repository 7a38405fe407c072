package census

import (
	"net/http"
	"net/url"
	"strings"
)

// prometheusClient is the client that queries the Prometheus API at u:
// PrometheusClient if u is at PrometheusURL's origin, else HTTPClient, which
// carries no credentials.
func (o Options) prometheusClient(u string) *http.Client {
	if o.PrometheusClient == nil || !sameOrigin(u, o.PrometheusURL) {
		return o.HTTPClient
	}
	return o.PrometheusClient
}

// sameOrigin reports whether URLs a and b have one scheme, host and port
// (the default port of the scheme when one leaves it out), and no user
// information (which would name other credentials).
func sameOrigin(a, b string) bool {
	ua, err := url.Parse(a)
	if err != nil || ua.Host == "" || ua.User != nil {
		return false
	}
	ub, err := url.Parse(b)
	if err != nil || ub.Host == "" || ub.User != nil {
		return false
	}
	return strings.EqualFold(ua.Scheme, ub.Scheme) && strings.EqualFold(ua.Hostname(), ub.Hostname()) && port(ua) == port(ub)
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
		return "443"
	case "http":
		return "80"
	}
	return ""
}
