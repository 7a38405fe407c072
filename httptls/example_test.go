package httptls_test

import (
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/httptls"
)

// An HTTPS server and client whose certificate and trust follow their providers
// (in a program: Reloaders reading mounted Secrets), speaking HTTP/2.
func Example() {
	ca := hotcerttest.MustNewCA()
	leaf := ca.MustIssue()
	server, err := hotcert.Validate(hotcert.Content{
		Cert: hotcert.Input{Name: "tls.crt", Data: leaf.ChainPEM},
		Key:  hotcert.Input{Name: "tls.key", Data: leaf.KeyPEM},
	})
	if err != nil {
		panic(err)
	}
	trust, err := hotcert.Validate(hotcert.Content{CA: hotcert.Input{Name: "ca.crt", Data: ca.CertPEM}})
	if err != nil {
		panic(err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv := &http.Server{
		TLSConfig:         httptls.ServerConfig(hotcert.NewStore(server)),
		ReadHeaderTimeout: 10 * time.Second,
		Handler:           http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}),
	}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	defer srv.Close()

	tr := httptls.NewTransport(hotcert.NewStore(trust))
	defer tr.Close()
	resp, err := (&http.Client{Transport: tr}).Get("https://" + ln.Addr().String() + "/")
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println(resp.Proto, resp.StatusCode)
	// Output: HTTP/2.0 200
}
