package tlsconfig_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/grpccreds"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/tlsconfig"
)

// leafID is an identity (chain and key) plus a time inside its validity window.
type leafID struct {
	chain, key []byte
	validAt    time.Time
}

func idOf(l *hotcerttest.Leaf) *leafID {
	return &leafID{chain: l.ChainPEM, key: l.KeyPEM, validAt: l.Cert.NotBefore.Add(time.Minute)}
}

// state is what each end holds at one moment.
type state struct {
	srv      *leafID
	srvTrust []*hotcerttest.CA // nil: the server requests no client certificate
	cli      *leafID           // nil: the client has no certificate
	cliTrust []*hotcerttest.CA
}

// parityCase is one row of the verification-parity matrix. When before is set, the
// hot-reloading ends start from it, connect once, rotate to the final state and
// connect again; the static reference is built from each state directly.
type parityCase struct {
	name       string
	host       string // dialed: "127.0.0.1" or "localhost"
	serverName string // the name the client expects; "" means host
	final      state
	want       bool
	before     *state
	wantBefore bool
}

func (c parityCase) expectedName() string {
	if c.serverName != "" {
		return c.serverName
	}
	return c.host
}

type parityPKI struct {
	ca1, ca2, inter1, constrained *hotcerttest.CA
}

func newParityPKI() parityPKI {
	ca1 := hotcerttest.MustNewCA()
	return parityPKI{
		ca1:         ca1,
		ca2:         hotcerttest.MustNewCA(),
		inter1:      ca1.MustNewIntermediate(),
		constrained: hotcerttest.MustNewCA(hotcerttest.WithPermittedDNSDomains("example.com")),
	}
}

func parityCases(p parityPKI) []parityCase {
	now := time.Now()
	ip := func(s string) net.IP { return net.ParseIP(s) }
	srvGood := idOf(p.ca1.MustIssue())
	srvCA2 := idOf(p.ca2.MustIssue())
	cliGood := idOf(p.ca1.MustIssue(hotcerttest.WithCommonName("agent"), hotcerttest.WithDNSNames("agent")))
	viaInter := p.inter1.MustIssue()
	missingInter := &leafID{chain: viaInter.CertPEM, key: viaInter.KeyPEM, validAt: now}
	cliInter := p.inter1.MustIssue(hotcerttest.WithCommonName("agent"))
	selfSigned := hotcerttest.MustNewCA(hotcerttest.WithIsCA(false), hotcerttest.WithCommonName("localhost"),
		hotcerttest.WithDNSNames("localhost"), hotcerttest.WithIPAddresses(ip("127.0.0.1")))

	ca1 := []*hotcerttest.CA{p.ca1}
	ca2 := []*hotcerttest.CA{p.ca2}
	ca12 := []*hotcerttest.CA{p.ca1, p.ca2}
	ca21 := []*hotcerttest.CA{p.ca2, p.ca1}
	tlsOnly := func(srv *leafID, cliTrust []*hotcerttest.CA) state { return state{srv: srv, cliTrust: cliTrust} }
	mtls := func(cli *leafID, srvTrust []*hotcerttest.CA) state {
		return state{srv: srvGood, srvTrust: srvTrust, cli: cli, cliTrust: ca1}
	}

	return []parityCase{
		// Server certificate checks done by the client.
		{name: "good/ip", host: "127.0.0.1", final: tlsOnly(srvGood, ca1), want: true},
		{name: "good/dns", host: "localhost", final: tlsOnly(srvGood, ca1), want: true},
		{name: "wrong host", host: "127.0.0.1", serverName: "other.example", final: tlsOnly(srvGood, ca1)},
		{name: "wrong ip", host: "127.0.0.1", serverName: "127.0.0.2", final: tlsOnly(srvGood, ca1)},
		{name: "dns-only SAN dialed by ip", host: "127.0.0.1",
			final: tlsOnly(idOf(p.ca1.MustIssue(hotcerttest.WithIPAddresses())), ca1)},
		{name: "dns-only SAN dialed by name", host: "localhost",
			final: tlsOnly(idOf(p.ca1.MustIssue(hotcerttest.WithIPAddresses())), ca1), want: true},
		{name: "ip-only SAN dialed by name", host: "localhost",
			final: tlsOnly(idOf(p.ca1.MustIssue(hotcerttest.WithDNSNames(), hotcerttest.WithCommonName("localhost"))), ca1)},
		{name: "ip-only SAN dialed by ip", host: "127.0.0.1",
			final: tlsOnly(idOf(p.ca1.MustIssue(hotcerttest.WithDNSNames())), ca1), want: true},
		{name: "server expired", host: "127.0.0.1",
			final: tlsOnly(idOf(p.ca1.MustIssue(hotcerttest.WithValidity(now.Add(-48*time.Hour), now.Add(-24*time.Hour)))), ca1)},
		{name: "server not yet valid", host: "localhost",
			final: tlsOnly(idOf(p.ca1.MustIssue(hotcerttest.WithValidity(now.Add(24*time.Hour), now.Add(48*time.Hour)))), ca1)},
		{name: "server with clientAuth EKU only", host: "localhost",
			final: tlsOnly(idOf(p.ca1.MustIssue(hotcerttest.WithExtKeyUsages(x509.ExtKeyUsageClientAuth))), ca1)},
		{name: "server unknown CA", host: "127.0.0.1", final: tlsOnly(srvCA2, ca1)},
		{name: "server via intermediate", host: "127.0.0.1", final: tlsOnly(idOf(viaInter), ca1), want: true},
		{name: "server missing intermediate", host: "127.0.0.1", final: tlsOnly(missingInter, ca1)},
		{name: "name constraint violated", host: "localhost",
			final: tlsOnly(idOf(p.constrained.MustIssue()), []*hotcerttest.CA{p.constrained})},
		{name: "name constraint respected", host: "127.0.0.1", serverName: "api.example.com",
			final: tlsOnly(idOf(p.constrained.MustIssue(hotcerttest.WithDNSNames("api.example.com"))), []*hotcerttest.CA{p.constrained}), want: true},
		{name: "self-signed server", host: "localhost",
			final: tlsOnly(&leafID{chain: selfSigned.CertPEM, key: selfSigned.KeyPEM, validAt: now}, ca1)},
		{name: "union old+new, old-signed server", host: "127.0.0.1", final: tlsOnly(srvGood, ca12), want: true},
		{name: "union new+old, old-signed server", host: "localhost", final: tlsOnly(srvGood, ca21), want: true},
		{name: "union old+new, new-signed server", host: "localhost", final: tlsOnly(srvCA2, ca12), want: true},
		{name: "union new+old, new-signed server", host: "127.0.0.1", final: tlsOnly(srvCA2, ca21), want: true},

		// Client certificate checks done by the server.
		{name: "mtls good", host: "127.0.0.1", final: mtls(cliGood, ca1), want: true},
		{name: "mtls no client certificate", host: "127.0.0.1", final: mtls(nil, ca1)},
		{name: "mtls client unknown CA", host: "localhost", final: mtls(idOf(p.ca2.MustIssue()), ca1)},
		{name: "mtls client expired", host: "127.0.0.1",
			final: mtls(idOf(p.ca1.MustIssue(hotcerttest.WithValidity(now.Add(-48*time.Hour), now.Add(-24*time.Hour)))), ca1)},
		{name: "mtls client not yet valid", host: "127.0.0.1",
			final: mtls(idOf(p.ca1.MustIssue(hotcerttest.WithValidity(now.Add(24*time.Hour), now.Add(48*time.Hour)))), ca1)},
		{name: "mtls client with serverAuth EKU only", host: "localhost",
			final: mtls(idOf(p.ca1.MustIssue(hotcerttest.WithExtKeyUsages(x509.ExtKeyUsageServerAuth))), ca1)},
		{name: "mtls client via intermediate", host: "127.0.0.1", final: mtls(idOf(cliInter), ca1), want: true},
		{name: "mtls client missing intermediate", host: "127.0.0.1",
			final: mtls(&leafID{chain: cliInter.CertPEM, key: cliInter.KeyPEM, validAt: now}, ca1)},
		{name: "mtls client CAs union new+old", host: "127.0.0.1", final: mtls(cliGood, ca21), want: true},

		// Rotations of the trust bundle and the certificate.
		{name: "client CA removed after rotation", host: "127.0.0.1",
			before: &state{srv: srvGood, cliTrust: ca12}, wantBefore: true, final: tlsOnly(srvGood, ca2)},
		{name: "client CA added after rotation", host: "localhost",
			before: &state{srv: srvCA2, cliTrust: ca1}, wantBefore: false, final: tlsOnly(srvCA2, ca12), want: true},
		{name: "server certificate rotated to a new CA the client trusts", host: "127.0.0.1",
			before: &state{srv: srvGood, cliTrust: ca12}, wantBefore: true, final: tlsOnly(srvCA2, ca12), want: true},
		{name: "server certificate rotated to a CA the client lacks", host: "localhost",
			before: &state{srv: srvGood, cliTrust: ca1}, wantBefore: true, final: tlsOnly(srvCA2, ca1)},
		{name: "server client-CA removed after rotation", host: "127.0.0.1",
			before: &state{srv: srvGood, srvTrust: ca12, cli: cliGood, cliTrust: ca1}, wantBefore: true,
			final: mtls(cliGood, ca2)},
		{name: "server client-CA added after rotation", host: "localhost",
			before: &state{srv: srvGood, srvTrust: ca2, cli: cliGood, cliTrust: ca1}, wantBefore: false,
			final: mtls(cliGood, ca21), want: true},
	}
}

var tlsVersions = []struct {
	name string
	max  uint16
}{{"TLS1.3", tls.VersionTLS13}, {"TLS1.2", tls.VersionTLS12}}

// TestVerificationParity checks that hot-reloading servers and clients accept or
// reject exactly what static standard-library configs with the same material accept
// or reject, before and after rotations, over real loopback handshakes.
func TestVerificationParity(t *testing.T) {
	p := newParityPKI()
	cases := parityCases(p)
	if len(cases) < 20 {
		t.Fatalf("matrix has %d cases, want at least 20", len(cases))
	}
	for _, v := range tlsVersions {
		for _, c := range cases {
			t.Run(v.name+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				runParityCase(t, c, v.max)
			})
		}
	}
}

func runParityCase(t *testing.T, c parityCase, maxVersion uint16) {
	static := func(s state) result {
		return connect(t, tlsServerSide(staticServerConfig(t, s)), tlsClientSide(staticClientConfig(t, s, c.expectedName(), maxVersion)), c.host)
	}
	refFinal := static(c.final)
	if refFinal.ok != c.want {
		t.Fatalf("static reference: %v, the matrix expects accepted=%v", refFinal, c.want)
	}
	var refBefore result
	if c.before != nil {
		refBefore = static(*c.before)
		if refBefore.ok != c.wantBefore {
			t.Fatalf("static reference before rotation: %v, the matrix expects accepted=%v", refBefore, c.wantBefore)
		}
	}

	for _, sk := range serverKinds {
		for _, ck := range clientKinds {
			if ck.dnsOnly && (net.ParseIP(c.host) != nil || c.serverName != "") {
				continue
			}
			name := sk.name + "→" + ck.name
			start := c.final
			if c.before != nil {
				start = *c.before
			}
			ends := newEnds(t, start)
			srv := sk.make(ends)
			cli := ck.make(ends, c, maxVersion)
			if c.before != nil {
				if got := connect(t, srv, cli, c.host); got.ok != refBefore.ok {
					t.Errorf("%s before rotation: %v; static: %v", name, got, refBefore)
				}
				ends.set(t, c.final)
			}
			if got := connect(t, srv, cli, c.host); got.ok != refFinal.ok {
				t.Errorf("%s: %v; static: %v", name, got, refFinal)
			}
		}
	}
}

// ends holds the stores the hot-reloading server and client read.
type ends struct {
	srvID, srvTrust, cliID, cliTrust *hotcert.Store
	mtls                             bool
}

func newEnds(t *testing.T, s state) *ends {
	e := &ends{srvID: hotcert.NewStore(nil), srvTrust: hotcert.NewStore(nil), cliID: hotcert.NewStore(nil), cliTrust: hotcert.NewStore(nil)}
	e.set(t, s)
	e.mtls = s.srvTrust != nil
	return e
}

func (e *ends) set(t *testing.T, s state) {
	e.srvID.Set(identity(t, s.srv.chain, s.srv.key, s.srv.validAt))
	if s.srvTrust != nil {
		e.srvTrust.Set(trust(t, s.srvTrust...))
	}
	if s.cli != nil {
		e.cliID.Set(identity(t, s.cli.chain, s.cli.key, s.cli.validAt))
	} else {
		e.cliID.Set(nil)
	}
	e.cliTrust.Set(trust(t, s.cliTrust...))
}

var serverKinds = []struct {
	name string
	make func(e *ends) serverSide
}{
	{"ServerConfig", func(e *ends) serverSide {
		if e.mtls {
			return tlsServerSide(tlsconfig.MTLSServerConfig(e.srvID, tlsconfig.WithTrust(e.srvTrust), tlsconfig.WithNextProtos("h2")))
		}
		return tlsServerSide(tlsconfig.ServerConfig(e.srvID, tlsconfig.WithTrust(e.srvTrust), tlsconfig.WithNextProtos("h2")))
	}},
	{"grpccreds server", func(e *ends) serverSide {
		creds := grpccreds.NewServer(e.srvID, tlsconfig.WithTrust(e.srvTrust))
		if e.mtls {
			creds = grpccreds.NewMTLSServer(e.srvID, tlsconfig.WithTrust(e.srvTrust))
		}
		return func(raw net.Conn) (net.Conn, error) {
			conn, _, err := creds.ServerHandshake(raw)
			return conn, err
		}
	}},
}

var clientKinds = []struct {
	name    string
	dnsOnly bool // relies on the SNI for the expected name
	make    func(e *ends, c parityCase, maxVersion uint16) clientSide
}{
	{name: "ClientConfig", make: func(e *ends, c parityCase, maxVersion uint16) clientSide {
		return tlsClientSide(tlsconfig.ClientConfig(e.cliID, c.expectedName(), tlsconfig.WithTrust(e.cliTrust),
			tlsconfig.WithBase(&tls.Config{MaxVersion: maxVersion, NextProtos: []string{"h2"}})))
	}},
	{name: "ClientConfig without name (SNI)", dnsOnly: true, make: func(e *ends, c parityCase, maxVersion uint16) clientSide {
		return tlsClientSide(tlsconfig.ClientConfig(e.cliID, "", tlsconfig.WithTrust(e.cliTrust),
			tlsconfig.WithBase(&tls.Config{MaxVersion: maxVersion, NextProtos: []string{"h2"}})))
	}},
	{name: "Dialer", make: func(e *ends, c parityCase, maxVersion uint16) clientSide {
		opts := []tlsconfig.Option{tlsconfig.WithTrust(e.cliTrust), tlsconfig.WithBase(&tls.Config{MaxVersion: maxVersion}), tlsconfig.WithNextProtos("h2")}
		if c.serverName != "" {
			opts = append(opts, tlsconfig.WithServerName(c.serverName))
		}
		d := tlsconfig.NewDialer(e.cliID, opts...)
		return func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}},
	{name: "grpccreds client", make: func(e *ends, c parityCase, maxVersion uint16) clientSide {
		creds := grpccreds.NewClient(e.cliID, tlsconfig.WithTrust(e.cliTrust), tlsconfig.WithBase(&tls.Config{MaxVersion: maxVersion}))
		return func(ctx context.Context, addr string) (net.Conn, error) {
			raw, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			if err != nil {
				return nil, err
			}
			_, port, _ := net.SplitHostPort(addr)
			conn, _, err := creds.ClientHandshake(ctx, net.JoinHostPort(c.expectedName(), port), raw)
			if err != nil {
				raw.Close()
				return nil, err
			}
			return conn, nil
		}
	}},
}

func staticServerConfig(t *testing.T, s state) *tls.Config {
	cfg := &tls.Config{
		Certificates: []tls.Certificate{keyPair(t, s.srv.chain, s.srv.key)},
		NextProtos:   []string{"h2"},
	}
	if s.srvTrust != nil {
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		cfg.ClientCAs = hotcerttest.Pool(s.srvTrust...)
	}
	return cfg
}

func staticClientConfig(t *testing.T, s state, serverName string, maxVersion uint16) *tls.Config {
	cfg := &tls.Config{
		RootCAs:    hotcerttest.Pool(s.cliTrust...),
		ServerName: serverName,
		MaxVersion: maxVersion,
		NextProtos: []string{"h2"},
	}
	if s.cli != nil {
		cfg.Certificates = []tls.Certificate{keyPair(t, s.cli.chain, s.cli.key)}
	}
	return cfg
}
