package hotcert_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/source/file"
)

// Serve a certificate that follows a kubelet-mounted Secret: the next handshake after
// a rotation gets the new certificate, with no restart. (The tlsconfig package wires
// the same Reloader into server and client configs, client CAs included.)
func Example() {
	// A Secret volume as the kubelet lays it out, with a first certificate.
	tmp, err := os.MkdirTemp("", "hotcert-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "tls")
	ca := hotcerttest.MustNewCA()
	volume := hotcerttest.MustNewAtomicWriter(dir)
	first := ca.MustIssue()
	volume.MustWrite(map[string][]byte{"tls.crt": first.ChainPEM, "tls.key": first.KeyPEM})

	// The first load fails fast on a missing or invalid file.
	src, err := file.New(file.WithKeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")))
	if err != nil {
		log.Fatal(err)
	}
	reloader, err := hotcert.New(context.Background(), src)
	if err != nil {
		log.Fatal(err)
	}
	go reloader.Start(context.Background())
	defer reloader.Close()

	// Certificates stays empty so that GetCertificate runs on every handshake, with
	// or without SNI.
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return reloader.Current().Certificate(), nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _ = c.(*tls.Conn).Handshake(); c.Close() }()
		}
	}()

	served := func() string {
		conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: hotcerttest.Pool(ca)})
		if err != nil {
			log.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	fmt.Println("first served:", served() == first.Cert.SerialNumber.String())

	// cert-manager renews; the kubelet swaps ..data; the next handshake sees it.
	second := ca.MustIssue()
	volume.MustWrite(map[string][]byte{"tls.crt": second.ChainPEM, "tls.key": second.KeyPEM})
	for reloader.Current().Generation() == 1 {
		time.Sleep(time.Millisecond)
	}
	fmt.Println("second served:", served() == second.Cert.SerialNumber.String())
	// Output:
	// first served: true
	// second served: true
}
