package options

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
)

// securedPrometheus is a real Prometheus server behind its own TLS and
// basic auth (testutil.StartSecuredPrometheus); caFile holds its CA.
type securedPrometheus struct {
	url    string
	caFile string
}

func startSecuredPrometheus(t *testing.T, ca *hotcerttest.CA) securedPrometheus {
	t.Helper()
	u, caFile := testutil.StartSecuredPrometheus(t, ca)
	return securedPrometheus{url: u, caFile: caFile}
}

// bearerFront is what kube-rbac-proxy is to a kube-prometheus Prometheus: a
// TLS front (a leaf of ca) that lets through only requests bearing the
// token it currently accepts (the API server's TokenReview, in a cluster),
// to the secured Prometheus behind it.
func bearerFront(t *testing.T, ca *hotcerttest.CA, prom securedPrometheus) (u string, accept func(token string)) {
	t.Helper()
	backend, err := url.Parse(prom.url)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(prom.caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	proxy := httputil.NewSingleHostReverseProxy(backend)
	proxy.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	var mu sync.Mutex
	token := ""
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		want := "Bearer " + token
		mu.Unlock()
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte(want)) != 1 {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		r.Header.Del("Authorization")
		r.SetBasicAuth(testutil.PrometheusUser, testutil.PrometheusPassword)
		proxy.ServeHTTP(w, r)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.MustIssue(hotcerttest.WithIPAddresses(net.ParseIP("127.0.0.1"))).TLSCertificate()}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.URL, func(tok string) { mu.Lock(); token = tok; mu.Unlock() }
}

// query runs the census's kind of instant query with the client the
// options completed into, and returns its error.
func query(t *testing.T, args ...string) error {
	t.Helper()
	cfg, err := parse(t, append([]string{"--census", "--kubeconfig=" + kubeconfig(t, "")}, args...)...).Complete(logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Census.PrometheusClient == nil {
		t.Fatal("no Prometheus client")
	}
	c, err := api.NewClient(api.Config{Address: cfg.Census.PrometheusURL, Client: cfg.Census.PrometheusClient})
	if err != nil {
		t.Fatal(err)
	}
	_, _, _, err = promv1.NewAPI(c).Query(context.Background(), `{__name__=~"hotcert_tls_cert_info|hotcert_tls_ca_certificate_info"}`, time.Time{})
	return err
}

// TestCensusPrometheusBehindAuth: a real Prometheus behind its own TLS and
// basic auth, and behind a bearer-checking front, answers the census's query
// with the --census-prometheus-* credentials, and refuses it without them;
// a rotated token file is read at the next query, without a restart.
func TestCensusPrometheusBehindAuth(t *testing.T) {
	ca := hotcerttest.MustNewCA(hotcerttest.WithCommonName("monitoring CA"))
	prom := startSecuredPrometheus(t, ca)
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		tmp := p + ".tmp"
		if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, p); err != nil { // as the kubelet swaps a projected token
			t.Fatal(err)
		}
		return p
	}
	unauthorized := func(err error) bool {
		var apiErr *promv1.Error
		return errors.As(err, &apiErr) && strings.Contains(apiErr.Msg, "401")
	}

	t.Run("web.config TLS and basic auth, with an http_config file", func(t *testing.T) {
		pw := write("password", testutil.PrometheusPassword+"\n")
		httpConfig := write("http.yml", fmt.Sprintf("basic_auth: {username: %s, password_file: %q}\ntls_config: {ca_file: %q}\n", testutil.PrometheusUser, pw, prom.caFile))
		if err := query(t, "--census-prometheus-url="+prom.url, "--census-prometheus-http-config-file="+httpConfig); err != nil {
			t.Fatalf("with basic auth and the CA: %v", err)
		}
		noAuth := write("http-noauth.yml", fmt.Sprintf("tls_config: {ca_file: %q}\n", prom.caFile))
		if err := query(t, "--census-prometheus-url="+prom.url, "--census-prometheus-http-config-file="+noAuth); !unauthorized(err) {
			t.Fatalf("without credentials: %v, want HTTP 401", err)
		}
		var unknownCA x509.UnknownAuthorityError
		if err := query(t, "--census-prometheus-url="+prom.url, "--census-prometheus-ca-file="+write("other-ca.crt", string(hotcerttest.MustNewCA().CertPEM))); !errors.As(err, &unknownCA) {
			t.Fatalf("trusting another CA: %v, want an unknown authority", err)
		}
	})

	t.Run("bearer token front, token rotated", func(t *testing.T) {
		front, accept := bearerFront(t, ca, prom)
		accept("token-1")
		token := write("token", "token-1\n")
		args := []string{"--census-prometheus-url=" + front, "--census-prometheus-bearer-token-file=" + token, "--census-prometheus-ca-file=" + prom.caFile}
		cfg, err := parse(t, append([]string{"--census", "--kubeconfig=" + kubeconfig(t, "")}, args...)...).Complete(logr.Discard())
		if err != nil {
			t.Fatal(err)
		}
		c, err := api.NewClient(api.Config{Address: cfg.Census.PrometheusURL, Client: cfg.Census.PrometheusClient})
		if err != nil {
			t.Fatal(err)
		}
		q := func() error {
			_, _, _, err := promv1.NewAPI(c).Query(context.Background(), "up", time.Time{})
			return err
		}
		if err := q(); err != nil {
			t.Fatalf("with the token: %v", err)
		}
		// The token is rotated: the front accepts only the new one, and the
		// same client reads it from the file at its next query.
		accept("token-2")
		if err := q(); !unauthorized(err) {
			t.Fatalf("with the old token: %v, want HTTP 401", err)
		}
		write("token", "token-2\n")
		if err := q(); err != nil {
			t.Fatalf("after the token file's rotation: %v", err)
		}
		if err := query(t, "--census-prometheus-url="+front, "--census-prometheus-ca-file="+prom.caFile); !unauthorized(err) {
			t.Fatalf("without a token: %v, want HTTP 401", err)
		}
	})
}

// TestCensusPrometheusFlags: credentials need the Prometheus they are for,
// never go in clear, and a file they name must be there at start.
func TestCensusPrometheusFlags(t *testing.T) {
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--census-prometheus-bearer-token-file=" + token}, "need --census-prometheus-url"},
		{[]string{"--census-prometheus-url=prometheus:9090"}, "want http(s)://host[:port]"},
		{[]string{"--census-prometheus-url=https://u:p@prometheus:9090"}, "without user information"},
		{[]string{"--census-prometheus-url=http://prometheus:9090", "--census-prometheus-bearer-token-file=" + token}, "in clear"},
		{[]string{"--census-prometheus-url=https://prometheus:9090", "--census-prometheus-cert-file=c.crt"}, "go together"},
		{[]string{"--census-prometheus-url=https://prometheus:9090", "--census-prometheus-http-config-file=h.yml", "--census-prometheus-ca-file=ca.crt"}, "one or the other"},
	} {
		if err := parse(t, append([]string{"--census"}, tc.args...)...).Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--census-prometheus-bearer-token-file=" + token + ".missing"}, "--census-prometheus-bearer-token-file: open"},
		{[]string{"--census-prometheus-ca-file=" + token + ".missing"}, "--census-prometheus-ca-file: open"},
		{[]string{"--census-prometheus-http-config-file=" + token + ".missing"}, "--census-prometheus-http-config-file"},
	} {
		args := append([]string{"--census", "--kubeconfig=" + kubeconfig(t, ""), "--census-prometheus-url=https://prometheus:9090"}, tc.args...)
		if _, err := parse(t, args...).Complete(logr.Discard()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
	plain := filepath.Join(t.TempDir(), "http.yml")
	if err := os.WriteFile(plain, []byte("basic_auth: {username: u, password: p}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--census", "--kubeconfig=" + kubeconfig(t, ""), "--census-prometheus-url=http://prometheus:9090", "--census-prometheus-http-config-file=" + plain}
	if _, err := parse(t, args...).Complete(logr.Discard()); err == nil || !strings.Contains(err.Error(), "in clear") {
		t.Errorf("basic auth over http: %v", err)
	}
	insecure := filepath.Join(t.TempDir(), "http.yml")
	if err := os.WriteFile(insecure, []byte("tls_config: {insecure_skip_verify: true}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args = []string{"--census", "--kubeconfig=" + kubeconfig(t, ""), "--census-prometheus-url=https://prometheus:9090", "--census-prometheus-http-config-file=" + insecure}
	if _, err := parse(t, args...).Complete(logr.Discard()); err == nil || !strings.Contains(err.Error(), "insecure_skip_verify") {
		t.Errorf("insecure_skip_verify: %v", err)
	}
}

// TestCensusPrometheusRedirectKeepsTheToken: a redirect from the Prometheus
// to another host is not followed, so the token is never sent there (the
// credentials are set on every request the client makes).
func TestCensusPrometheusRedirectKeepsTheToken(t *testing.T) {
	var mu sync.Mutex
	var leaked []string
	elsewhere := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		leaked = append(leaked, r.Header.Get("Authorization"))
		mu.Unlock()
	}))
	defer elsewhere.Close()
	prom := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer prom.Close()
	dir := t.TempDir()
	caFile, token := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "token")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: prom.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(token, []byte("secret-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := query(t, "--census-prometheus-url="+prom.URL, "--census-prometheus-bearer-token-file="+token, "--census-prometheus-ca-file="+caFile)
	if err == nil {
		t.Fatal("a redirect answered the query")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(leaked) > 0 {
		t.Fatalf("the redirect was followed, with Authorization %q", leaked)
	}
}
