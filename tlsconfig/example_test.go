package tlsconfig_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/tlsconfig"
)

// exampleMaterial validates a leaf and a CA bundle, as a Reloader does with files.
func exampleMaterial(leaf *hotcerttest.Leaf, ca *hotcerttest.CA) *hotcert.Material {
	c := hotcert.Content{CA: hotcert.Input{Name: "ca.crt", Data: ca.CertPEM}}
	if leaf != nil {
		c.Cert = hotcert.Input{Name: "tls.crt", Data: leaf.ChainPEM}
		c.Key = hotcert.Input{Name: "tls.key", Data: leaf.KeyPEM}
	}
	m, err := hotcert.Validate(c)
	if err != nil {
		panic(err)
	}
	return m
}

// A server whose certificate rotates, and a client that dials it by IP address: each
// new connection gets the certificate current at its handshake.
func ExampleServerConfig() {
	ca := hotcerttest.MustNewCA()
	first, renewed := ca.MustIssue(), ca.MustIssue()
	server := hotcert.NewStore(exampleMaterial(first, ca)) // a *hotcert.Reloader in a program

	ln, err := tls.Listen("tcp", "127.0.0.1:0", tlsconfig.ServerConfig(server))
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()

	client := tlsconfig.NewDialer(hotcert.NewStore(exampleMaterial(nil, ca)))
	served := func() *hotcerttest.Leaf {
		conn, err := client.DialContext(context.Background(), "tcp", ln.Addr().String())
		if err != nil {
			panic(err)
		}
		defer conn.Close()
		serial := conn.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber
		if serial.Cmp(first.Cert.SerialNumber) == 0 {
			return first
		}
		return renewed
	}
	fmt.Println("first connection gets the first certificate:", served() == first)
	server.Set(exampleMaterial(renewed, ca))
	fmt.Println("next connection gets the renewed certificate:", served() == renewed)
	// Output:
	// first connection gets the first certificate: true
	// next connection gets the renewed certificate: true
}

// ClientConfig is one *tls.Config for code that dials by itself. The expected name
// is explicit, so dialing an IP address still checks the certificate's IP SANs.
func ExampleClientConfig() {
	ca := hotcerttest.MustNewCA()
	leaf := ca.MustIssue(hotcerttest.WithIPAddresses(net.ParseIP("127.0.0.1")))
	ln, err := tls.Listen("tcp", "127.0.0.1:0", tlsconfig.ServerConfig(hotcert.NewStore(exampleMaterial(leaf, ca))))
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()

	trust := hotcert.NewStore(exampleMaterial(nil, ca))
	for _, name := range []string{"127.0.0.1", "10.0.0.1"} {
		conn, err := tls.Dial("tcp", ln.Addr().String(), tlsconfig.ClientConfig(trust, name))
		if err == nil {
			conn.Close()
		}
		fmt.Printf("expecting %s: accepted=%v\n", name, err == nil)
	}
	// Output:
	// expecting 127.0.0.1: accepted=true
	// expecting 10.0.0.1: accepted=false
}
