package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/internal/spiretest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/source/spiffe"
	"github.com/hotcert/hotcert/tlsconfig"
)

// hotcert proxy server --spiffe-socket in front of python's http.server, on a
// real SPIRE agent: the proxy serves the workload's X.509-SVID and requires
// client SVIDs of the trust domain's bundle (the allow list names the workload);
// Go clients holding their connections keep sending requests while the agent
// rotates the short-lived SVID, and the proxy's new SVID reaches new handshakes
// with no request failing. A client without a certificate is refused, and
// hotcert proxy client --spiffe-socket reaches the program through it.
func TestProxyServerOnSPIFFEFollowsSVIDRotations(t *testing.T) {
	requireTool(t, "python3")
	sp := spiretest.Start(t)
	sp.RegisterWorkload()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	python := pythonHTTPServer(t)
	addr, metricsAddr := freeAddr(t), freeAddr(t)
	var logs testutil.LogBuffer
	done := proxyRun(t, ctx, &logs, metricsAddr, "server", "--mode", "http", "--listen", addr, "--target", python,
		"--spiffe-socket", "unix://"+sp.AgentSock, "--allow-spiffe-id", spiretest.WorkloadID, "--drain-window", "500ms")
	// Stopped before the agent (the test's cleanups stop SPIRE): no outage is
	// seen by the proxy while the test looks.
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("hotcert proxy: %v", err)
		}
	}()

	// The clients are the same workload, with their own reloader of the SVID:
	// they present it and verify the proxy's SVID (DNS name localhost) against
	// the bundle.
	src, err := spiffe.New(ctx, spiffe.WithAddr("unix://"+sp.AgentSock))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	r, err := hotcert.New(ctx, src, hotcert.WithInitialWait(time.Minute), hotcert.WithPollInterval(0))
	if err != nil {
		t.Fatalf("the client's SVID: %v\nagent log:\n%s", err, sp.AgentLog())
	}
	go r.Start(ctx)
	defer r.Close()
	dialer := tlsconfig.NewDialer(r)
	var mu sync.Mutex
	served := map[string]int{} // the proxy's serials, by handshakes
	client := &http.Client{Transport: &http.Transport{
		DialTLSContext: func(ctx context.Context, network, a string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, a)
			if err != nil {
				return nil, err
			}
			leaf := c.(*tls.Conn).ConnectionState().PeerCertificates[0]
			if len(leaf.URIs) != 1 || leaf.URIs[0].String() != spiretest.WorkloadID {
				c.Close()
				return nil, fmt.Errorf("the proxy served %v, want the SVID %s", leaf.URIs, spiretest.WorkloadID)
			}
			mu.Lock()
			served[hotcert.FormatSerial(leaf.SerialNumber)]++
			mu.Unlock()
			return c, nil
		},
		MaxIdleConnsPerHost: 4,
	}}
	defer client.CloseIdleConnections()
	url := "https://" + net.JoinHostPort("localhost", addr[strings.LastIndex(addr, ":")+1:]) + "/hello.txt"
	l := &load{stop: make(chan struct{})}
	for i := range 2 {
		l.run(fmt.Sprintf("client %d", i), func() error {
			resp, err := client.Get(url)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != http.StatusOK || string(b) != "hello from python\n" {
				return fmt.Errorf("%s %q %v", resp.Status, b, err)
			}
			return nil
		})
	}
	l.waitMore(t, 20)
	serials := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(served)
	}
	// Two rotations by the agent (about every 5s with the harness's TTL), each
	// served on the connections the drain moved onto it.
	for deadline := time.Now().Add(2 * time.Minute); serials() < 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 2 minutes the clients were served %d SVIDs, want 3 (two rotations)\nagent log:\n%s", serials(), sp.AgentLog())
		}
	}
	l.waitMore(t, 20)
	close(l.stop)
	l.wg.Wait()
	mu.Lock()
	t.Logf("requests: %d ok, %d failed; handshakes by served serial: %v", l.ok.Load(), l.failed.Load(), served)
	mu.Unlock()
	if n := l.failed.Load(); n != 0 {
		t.Fatalf("%d requests failed across the SVID rotations: %v", n, l.errs)
	}
	// Each rotation is one reload of the one component (the SVID and the bundle
	// together), and nothing failed.
	text := metricsText(t, metricsAddr)
	if !strings.Contains(text, `hotcert_tls_reload_failures_total{component="proxy"} 0`+"\n") {
		t.Errorf("/metrics: a reload failure:\n%s", grepLines(text, "hotcert_tls_"))
	}
	if n := strings.Count(logs.String(), `"msg":"TLS certificate reloaded"`); n < 2 {
		t.Errorf("%d reload lines for the rotations, want one per rotation:\n%s", n, logs.String())
	}
	if strings.Contains(logs.String(), "PRIVATE KEY") {
		t.Error("key material in the proxy's logs")
	}

	// The client side on the same agent: a plaintext request to hotcert proxy
	// client --spiffe-socket reaches python through both proxies, the client
	// proxy presenting its SVID and verifying the server proxy's.
	local, localMetrics := freeAddr(t), freeAddr(t)
	cctx, ccancel := context.WithCancel(ctx)
	defer ccancel()
	clientDone := proxyRun(t, cctx, io.Discard, localMetrics, "client", "--mode", "http", "--listen", local,
		"--target", net.JoinHostPort("localhost", addr[strings.LastIndex(addr, ":")+1:]),
		"--spiffe-socket", "unix://"+sp.AgentSock, "--allow-spiffe-id", spiretest.WorkloadID)
	for range 3 {
		resp, err := http.Get("http://" + local + "/hello.txt")
		if err != nil {
			t.Fatalf("through hotcert proxy client: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(b) != "hello from python\n" {
			t.Fatalf("through hotcert proxy client: %s %q", resp.Status, b)
		}
	}
	ccancel()
	if err := <-clientDone; err != nil {
		t.Errorf("hotcert proxy client: %v", err)
	}

	// A client without an SVID does not get through.
	c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
	if err == nil {
		_, err = c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
		if err == nil {
			_, err = c.Read(make([]byte, 1))
		}
		c.Close()
	}
	if err == nil {
		t.Error("a client without a certificate got a response")
	}
	if _, err := client.Get(url); err != nil {
		t.Errorf("the proxy no longer serves its clients after the refusal: %v", err)
	}
}

// grepLines returns the lines of text that contain s.
func grepLines(text, s string) string {
	var b strings.Builder
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}
