package tlsconfig_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
)

// serverSide turns an accepted connection into a handshaken one.
type serverSide func(raw net.Conn) (net.Conn, error)

// clientSide dials addr and returns a handshaken connection.
type clientSide func(ctx context.Context, addr string) (net.Conn, error)

func tlsServerSide(cfg *tls.Config) serverSide {
	return func(raw net.Conn) (net.Conn, error) {
		c := tls.Server(raw, cfg)
		return c, c.Handshake()
	}
}

func tlsClientSide(cfg *tls.Config) clientSide {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		d := tls.Dialer{Config: cfg}
		return d.DialContext(ctx, "tcp", addr)
	}
}

// result is the outcome of one connection attempt, seen from both ends.
type result struct {
	ok             bool
	clientErr      error
	serverErr      error
	clientState    tls.ConnectionState
	serverState    tls.ConnectionState
	clientHasState bool
}

func (r result) String() string {
	if r.ok {
		return "accepted"
	}
	return "rejected (client: " + errString(r.clientErr) + "; server: " + errString(r.serverErr) + ")"
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// connect performs one real handshake over loopback TCP: the server accepts on
// 127.0.0.1, the client dials dialHost (an IP or "localhost"), the server writes
// "ok" once its handshake succeeded, and the attempt counts as accepted only if the
// client reads it (with TLS 1.3 a client learns that the server refused its
// certificate only on its first read).
func connect(t testing.TB, srv serverSide, cli clientSide, dialHost string) result {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())

	type srvOut struct {
		err   error
		state tls.ConnectionState
	}
	srvDone := make(chan srvOut, 1)
	go func() {
		raw, err := ln.Accept()
		if err != nil {
			srvDone <- srvOut{err: err}
			return
		}
		_ = raw.SetDeadline(time.Now().Add(10 * time.Second))
		conn, err := srv(raw)
		if err != nil {
			raw.Close()
			srvDone <- srvOut{err: err}
			return
		}
		var st tls.ConnectionState
		if sc, ok := conn.(interface{ ConnectionState() tls.ConnectionState }); ok {
			st = sc.ConnectionState()
		}
		_, err = conn.Write([]byte("ok"))
		_, _ = io.Copy(io.Discard, conn) // until the client closes
		conn.Close()
		srvDone <- srvOut{err: err, state: st}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var r result
	conn, err := cli(ctx, net.JoinHostPort(dialHost, port))
	if err == nil {
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 2)
		if _, err = io.ReadFull(conn, buf); err == nil && string(buf) != "ok" {
			err = errors.New("unexpected reply " + string(buf))
		}
		if tc, ok := conn.(interface{ ConnectionState() tls.ConnectionState }); ok {
			r.clientState, r.clientHasState = tc.ConnectionState(), true
		}
		conn.Close()
	}
	r.clientErr = err
	so := <-srvDone
	r.serverErr, r.serverState = so.err, so.state
	r.ok = r.clientErr == nil && r.serverErr == nil
	return r
}

// identity validates a leaf into identity Material, at a time inside the leaf's
// validity window so that expired and not-yet-valid leaves can be served.
func identity(t testing.TB, chainPEM, keyPEM []byte, validAt time.Time) *hotcert.Material {
	t.Helper()
	m, err := hotcert.Validate(hotcert.Content{
		Cert:   hotcert.Input{Name: "tls.crt", Data: chainPEM},
		Key:    hotcert.Input{Name: "tls.key", Data: keyPEM},
		Source: "test identity",
	}, hotcert.WithClock(func() time.Time { return validAt }))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// trust validates a CA bundle into trust Material.
func trust(t testing.TB, cas ...*hotcerttest.CA) *hotcert.Material {
	t.Helper()
	m, err := hotcert.Validate(hotcert.Content{
		CA:     hotcert.Input{Name: "ca.crt", Data: hotcerttest.BundlePEM(cas...)},
		Source: "test bundle",
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// full validates a leaf and a bundle into one Material.
func full(t testing.TB, leaf *hotcerttest.Leaf, cas ...*hotcerttest.CA) *hotcert.Material {
	t.Helper()
	m, err := hotcert.Validate(hotcert.Content{
		Cert:   hotcert.Input{Name: "tls.crt", Data: leaf.ChainPEM},
		Key:    hotcert.Input{Name: "tls.key", Data: leaf.KeyPEM},
		CA:     hotcert.Input{Name: "ca.crt", Data: hotcerttest.BundlePEM(cas...)},
		Source: "test material",
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func keyPair(t testing.TB, chainPEM, keyPEM []byte) tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(chainPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type x509Cert = x509.Certificate

// stateConn exposes the TLS state of a gRPC handshake's AuthInfo.
type stateConn struct {
	net.Conn
	info credentials.AuthInfo
}

func (c stateConn) ConnectionState() tls.ConnectionState {
	if ti, ok := c.info.(credentials.TLSInfo); ok {
		return ti.State
	}
	return tls.ConnectionState{}
}
