package testutil

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hotcert/hotcert/hotcerttest"
)

// PrometheusTarget is a scrape target of StartPrometheus: an address and
// its target labels (namespace and pod, as the usual kubernetes_sd
// relabeling sets them).
type PrometheusTarget struct {
	Addr   string
	Labels map[string]string
}

// PrometheusConfig configures StartPrometheus.
type PrometheusConfig struct {
	// Targets are scraped every second.
	Targets []PrometheusTarget
	// WebConfig, if set, is the server's --web.config.file (TLS, basic
	// auth); Scheme is then "https" when it serves TLS.
	WebConfig string
	Scheme    string
	// Ready reports whether the server at its base URL is ready (default:
	// GET /-/ready answers 200 over plain HTTP).
	Ready func(url string) bool
}

// StartPrometheus runs a real Prometheus server (Debian's package, which
// hack/tools.sh installs) until the test ends and returns its base URL once
// ready; its output goes to the test log if the test fails.
func StartPrometheus(t testing.TB, cfg PrometheusConfig) string {
	t.Helper()
	path, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("prometheus is not installed (hack/tools.sh installs it): %v", err)
	}
	dir := t.TempDir()
	var conf strings.Builder
	conf.WriteString("global: {scrape_interval: 1s, evaluation_interval: 1s}\nscrape_configs:\n- job_name: pods\n  static_configs:\n")
	for _, tg := range cfg.Targets {
		var labels []string
		for k, v := range tg.Labels {
			labels = append(labels, fmt.Sprintf("%s: %q", k, v))
		}
		fmt.Fprintf(&conf, "  - targets: [%q]\n    labels: {%s}\n", tg.Addr, strings.Join(labels, ", "))
	}
	if len(cfg.Targets) == 0 {
		conf.WriteString("  - targets: []\n")
	}
	args := []string{"--storage.tsdb.path=" + filepath.Join(dir, "data"), "--log.level=warn"}
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	args = append(args, "--config.file="+write("prometheus.yml", conf.String()))
	if cfg.WebConfig != "" {
		args = append(args, "--web.config.file="+write("web.yml", cfg.WebConfig))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	args = append(args, "--web.listen-address="+addr)
	var out LogBuffer
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus output:\n%s", out.String())
		}
	})
	scheme := cfg.Scheme
	if scheme == "" {
		scheme = "http"
	}
	url := scheme + "://" + addr
	ready := cfg.Ready
	if ready == nil {
		ready = plainReady
	}
	deadline := time.Now().Add(time.Minute)
	for !ready(url) {
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready at %s", url)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return url
}

func plainReady(url string) bool {
	c := &http.Client{Timeout: time.Second}
	resp, err := c.Get(url + "/-/ready")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// PrometheusUser and PrometheusPassword are the basic auth StartSecuredPrometheus asks
// for; prometheusPasswordHash is the password's bcrypt hash (cost 4), as
// web.config's basic_auth_users takes it.
const (
	PrometheusUser         = "census"
	PrometheusPassword     = "census-password"
	prometheusPasswordHash = "$2a$04$0PkkhO0QkhO63jp7lKnwSevxQr9g8Yrziw.Af0wiqAhIBizRZZl8q"
)

// StartSecuredPrometheus is StartPrometheus serving its API over TLS only,
// with a leaf of ca for 127.0.0.1, and basic auth only (PrometheusUser,
// PrometheusPassword), through its own web.config. It returns the URL and a
// file holding ca's certificate.
func StartSecuredPrometheus(t testing.TB, ca *hotcerttest.CA, targets ...PrometheusTarget) (url, caFile string) {
	t.Helper()
	dir := t.TempDir()
	leaf := ca.MustIssue(hotcerttest.WithIPAddresses(net.ParseIP("127.0.0.1")))
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cert, key, caFile := write("tls.crt", leaf.ChainPEM), write("tls.key", leaf.KeyPEM), write("ca.crt", ca.CertPEM)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	probe := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	u := StartPrometheus(t, PrometheusConfig{
		Targets:   targets,
		WebConfig: fmt.Sprintf("tls_server_config: {cert_file: %q, key_file: %q}\nbasic_auth_users: {%s: %q}\n", cert, key, PrometheusUser, prometheusPasswordHash),
		Scheme:    "https",
		Ready: func(u string) bool {
			req, _ := http.NewRequest(http.MethodGet, u+"/-/ready", nil)
			req.SetBasicAuth(PrometheusUser, PrometheusPassword)
			resp, err := probe.Do(req)
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		},
	})
	return u, caFile
}
