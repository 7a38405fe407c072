package options

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/prometheus/common/config"
	"github.com/spf13/pflag"

	"github.com/hotcert/hotcert/rollout/census"
)

// Prometheus is how the census reaches the cluster's Prometheus when it is
// behind authentication or TLS (kube-prometheus behind kube-rbac-proxy, an
// OpenShift thanos-querier, a web.config with TLS and basic auth). Its
// credentials go to URL's origin only: a TrustRotation naming another URL is
// queried without them.
type Prometheus struct {
	// URL is the Prometheus (its origin: scheme, host, port) the
	// credentials are for.
	URL string
	// BearerTokenFile holds a bearer token, re-read at every query (a
	// projected ServiceAccount token the kubelet rotates, e.g.
	// /var/run/secrets/kubernetes.io/serviceaccount/token).
	BearerTokenFile string
	// CAFile is the PEM bundle the server's certificate must chain to
	// (default: the system's roots); CertFile and KeyFile a client
	// certificate; ServerName the name checked in the server's certificate
	// (default URL's host). The files are re-read when they change.
	CAFile, CertFile, KeyFile, ServerName string
	// HTTPConfigFile is a file in Prometheus's http_config format (what
	// promtool's --http.config.file reads: authorization, basic_auth, oauth2,
	// tls_config, proxy_url), instead of the flags above.
	HTTPConfigFile string
}

func (p *Prometheus) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&p.URL, "census-prometheus-url", p.URL, "the Prometheus the census's credentials are for: a TrustRotation whose evidence.prometheus.url has this scheme, host and port is queried with the --census-prometheus-* credentials and TLS settings, any other without them")
	fs.StringVar(&p.BearerTokenFile, "census-prometheus-bearer-token-file", p.BearerTokenFile, "file holding a bearer token for --census-prometheus-url, re-read at every query (e.g. the pod's ServiceAccount token, for kube-rbac-proxy)")
	fs.StringVar(&p.CAFile, "census-prometheus-ca-file", p.CAFile, "PEM bundle of the CAs --census-prometheus-url's certificate must chain to (default: the system's); re-read when it changes")
	fs.StringVar(&p.CertFile, "census-prometheus-cert-file", p.CertFile, "client certificate (PEM) for --census-prometheus-url; re-read when it changes")
	fs.StringVar(&p.KeyFile, "census-prometheus-key-file", p.KeyFile, "private key (PEM) of --census-prometheus-cert-file")
	fs.StringVar(&p.ServerName, "census-prometheus-server-name", p.ServerName, "name checked in --census-prometheus-url's certificate (default: the URL's host)")
	fs.StringVar(&p.HTTPConfigFile, "census-prometheus-http-config-file", p.HTTPConfigFile, "file in Prometheus's http_config format (as promtool's --http.config.file: authorization, basic_auth, oauth2, tls_config) for --census-prometheus-url, instead of the other --census-prometheus-* flags")
}

func (p *Prometheus) flagsSet() bool {
	return p.BearerTokenFile != "" || p.CAFile != "" || p.CertFile != "" || p.KeyFile != "" || p.ServerName != ""
}

// validate checks the flags, naming the one at fault; it reads no file.
func (p *Prometheus) validate() error {
	if p.URL == "" {
		if p.flagsSet() || p.HTTPConfigFile != "" {
			return errors.New("--census-prometheus-* credentials need --census-prometheus-url, the Prometheus they are for")
		}
		return nil
	}
	u, err := url.Parse(p.URL)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil {
		return fmt.Errorf("--census-prometheus-url %q: want http(s)://host[:port], without user information", p.URL)
	}
	switch {
	case p.HTTPConfigFile != "" && p.flagsSet():
		return errors.New("--census-prometheus-http-config-file replaces the other --census-prometheus-* flags: give one or the other")
	case (p.CertFile == "") != (p.KeyFile == ""):
		return errors.New("--census-prometheus-cert-file and --census-prometheus-key-file go together")
	case p.BearerTokenFile != "" && u.Scheme != "https":
		return fmt.Errorf("--census-prometheus-bearer-token-file with %s would send the token in clear: use https", p.URL)
	}
	return nil
}

// complete sets the census options' Prometheus client from the flags,
// reading the files they name so that a missing one fails the start.
func (p *Prometheus) complete(c *census.Options) error {
	if p.URL == "" {
		return nil
	}
	cfg := config.DefaultHTTPClientConfig
	if p.HTTPConfigFile != "" {
		loaded, _, err := config.LoadHTTPConfigFile(p.HTTPConfigFile)
		if err != nil {
			return fmt.Errorf("--census-prometheus-http-config-file: %w", err)
		}
		cfg = *loaded
		if cfg.TLSConfig.InsecureSkipVerify {
			return fmt.Errorf("--census-prometheus-http-config-file %s: insecure_skip_verify would accept any server as the Prometheus: give its CA (tls_config.ca_file)", p.HTTPConfigFile)
		}
		if strings.HasPrefix(p.URL, "http:") && (cfg.Authorization != nil || cfg.BasicAuth != nil || cfg.OAuth2 != nil || cfg.BearerToken != "" || cfg.BearerTokenFile != "") {
			return fmt.Errorf("--census-prometheus-http-config-file %s: credentials with %s would be sent in clear: use https", p.HTTPConfigFile, p.URL)
		}
	} else {
		if p.BearerTokenFile != "" {
			cfg.Authorization = &config.Authorization{Type: "Bearer", CredentialsFile: p.BearerTokenFile}
		}
		cfg.TLSConfig = config.TLSConfig{CAFile: p.CAFile, CertFile: p.CertFile, KeyFile: p.KeyFile, ServerName: p.ServerName}
	}
	// A redirect is not followed: the credentials are set on every request,
	// and would follow it to another host.
	cfg.FollowRedirects = false
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("--census-prometheus-*: %w", err)
	}
	for flag, f := range map[string]string{
		"--census-prometheus-bearer-token-file": p.BearerTokenFile, "--census-prometheus-ca-file": p.CAFile,
		"--census-prometheus-cert-file": p.CertFile, "--census-prometheus-key-file": p.KeyFile,
	} {
		if f == "" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("%s: %w", flag, err)
		}
		if len(strings.TrimSpace(string(data))) == 0 {
			return fmt.Errorf("%s %s is empty", flag, f)
		}
	}
	hc, err := config.NewClientFromConfig(cfg, "hotcert_census_prometheus")
	if err != nil {
		return fmt.Errorf("--census-prometheus-*: %w", err)
	}
	hc.Timeout = census.DefaultHandshakeTimeout
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c.PrometheusURL, c.PrometheusClient = p.URL, hc
	return nil
}
