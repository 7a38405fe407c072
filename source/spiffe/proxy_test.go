package spiffe_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/spiretest"
	"github.com/hotcert/hotcert/proxy"
	"github.com/hotcert/hotcert/source/spiffe"
	"github.com/hotcert/hotcert/tlsconfig"
)

// hotcert proxy on a SPIRE agent's SVID: package proxy takes the Reloader over
// the Workload API like any other provider. The proxy serves the SVID, trusts
// the trust domain's bundle, and lets in the workload's own SPIFFE ID while a
// client of another CA, and an ID outside the allow list, are refused.
func TestSPIREProxyServesTheSVID(t *testing.T) {
	sp := spiretest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sp.RegisterWorkload()
	src, err := spiffe.New(ctx, spiffe.WithAddr("unix://"+sp.AgentSock))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	r, err := hotcert.New(ctx, src, hotcert.WithInitialWait(time.Minute), hotcert.WithPollInterval(0))
	if err != nil {
		t.Fatalf("first load: %v\nagent log:\n%s", err, sp.AgentLog())
	}
	go r.Start(ctx)
	defer r.Close()

	backend, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Close()
	go func() {
		for {
			c, err := backend.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	serve := func(allow string) string {
		s, err := proxy.NewServer(proxy.Target{Network: "tcp", Address: backend.Addr().String()}, []hotcert.Provider{r},
			proxy.WithTrust(r), proxy.WithAllow(proxy.Allow{SPIFFEIDs: []string{allow}}))
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go s.Serve(ln)
		t.Cleanup(func() { s.Shutdown(context.Background()) })
		return ln.Addr().String()
	}
	// The client is the workload itself, presenting its SVID; it does not verify
	// the proxy (an SVID names no host): the test is about the proxy's checks.
	dial := func(addr string, cfg *tls.Config) error {
		c, err := tls.Dial("tcp", addr, cfg)
		if err != nil {
			return err
		}
		defer c.Close()
		if _, err := io.WriteString(c, "ping"); err != nil {
			return err
		}
		buf := make([]byte, 4)
		_, err = io.ReadFull(c, buf)
		return err
	}
	svid := func() *tls.Config {
		cfg, err := tlsconfig.NewDialer(r, tlsconfig.WithBase(&tls.Config{InsecureSkipVerify: true})).Config(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	if err := dial(serve(spiretest.WorkloadID), svid()); err != nil {
		t.Fatalf("the workload's SVID was refused: %v", err)
	}
	if err := dial(serve("spiffe://example.org/someone-else"), svid()); err == nil {
		t.Fatal("an SVID outside the allow list got through")
	}
	other := hotcerttest.MustNewCA().MustIssue(hotcerttest.WithURIs(spiretest.WorkloadID))
	if err := dial(serve(spiretest.WorkloadID), &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{other.TLSCertificate()}}); err == nil {
		t.Fatal("a certificate of another CA, naming the same ID, got through")
	}
}
