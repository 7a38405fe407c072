package proxy_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/proxy"
)

// material validates a leaf (and optional CAs as its trust bundle) into a Material.
func material(t testing.TB, leaf *hotcerttest.Leaf, cas ...*hotcerttest.CA) *hotcert.Material {
	t.Helper()
	c := hotcert.Content{Source: "test"}
	if leaf != nil {
		c.Cert = hotcert.Input{Name: "tls.crt", Data: leaf.ChainPEM}
		c.Key = hotcert.Input{Name: "tls.key", Data: leaf.KeyPEM}
	}
	if len(cas) > 0 {
		c.CA = hotcert.Input{Name: "ca.crt", Data: hotcerttest.BundlePEM(cas...)}
	}
	m, err := hotcert.Validate(c)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// listen returns a loopback listener closed at the end of the test.
func listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// echoBackend serves an echo on a plaintext loopback port; every accepted
// connection is also sent on accepted, if not nil.
func echoBackend(t testing.TB, accepted chan<- net.Conn) proxy.Target {
	t.Helper()
	ln := listen(t)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if accepted != nil {
				accepted <- c
				continue
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	return proxy.Target{Network: "tcp", Address: ln.Addr().String()}
}

// serve runs s on a new listener until the end of the test and returns its address.
func serve(t testing.TB, s interface {
	Serve(net.Listener) error
	Shutdown(context.Context) error
}) string {
	t.Helper()
	ln := listen(t)
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		if err := <-done; !errors.Is(err, proxy.ErrServerClosed) {
			t.Errorf("Serve: %v, want ErrServerClosed", err)
		}
	})
	return ln.Addr().String()
}

// clientConfig trusts ca and presents leaf (if not nil).
func clientConfig(ca *hotcerttest.CA, leaf *hotcerttest.Leaf, serverName string) *tls.Config {
	cfg := &tls.Config{RootCAs: hotcerttest.Pool(ca), ServerName: serverName}
	if leaf != nil {
		cfg.Certificates = []tls.Certificate{leaf.TLSCertificate()}
	}
	return cfg
}

// roundTrip writes msg on c and reads it back.
func roundTrip(t testing.TB, c net.Conn, msg string) error {
	t.Helper()
	if _, err := io.WriteString(c, msg); err != nil {
		return err
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != msg {
		t.Fatalf("echo: got %q, want %q", buf, msg)
	}
	return nil
}

// waitClosed waits until reading c fails (the proxy closed it).
func waitClosed(t testing.TB, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the connection is still open")
	}
}

// logger writes text lines into b.
func logger(b *testutil.LogBuffer) *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }
