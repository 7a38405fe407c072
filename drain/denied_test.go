package drain_test

import (
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/drain"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/httptls"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/revocation"
	"github.com/hotcert/hotcert/tlsconfig"
)

// TestDeniedConnsCountsWhatTheListDenies: DeniedConns counts the open
// connections whose verified peer chain a list denies — one while the revoked
// client is connected and the server's list does not name it yet, 0 once the
// revocation cut closed it — and never the other client's.
func TestDeniedConnsCountsWhatTheListDenies(t *testing.T) {
	serverCA, clientCA := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	deny := newDenyFiles(t, clientCA)
	store := hotcert.NewStore(material(t, serverCA.MustIssue(), clientCA))
	srv := &http.Server{
		TLSConfig: httptls.MTLSServerConfig(store, tlsconfig.WithDenyList(deny.r)),
		Handler:   http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }),
	}
	d := drain.NewHTTPServer(drain.WithRevocationCut(deny.r), drain.WithGrace(time.Minute))
	d.Wrap(srv)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "https://" + ln.Addr().String() + "/"
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { d.Close(); srv.Close() })

	revoked, kept := clientCA.MustIssue(), clientCA.MustIssue()
	for _, c := range []*http.Client{httpClient(t, true, serverCA, kept), httpClient(t, true, serverCA, revoked)} {
		if _, _, err := get(t, c, url); err != nil {
			t.Fatal(err)
		}
	}
	denying, err := revocation.Validate(revocation.Content{DenyList: hotcert.Input{Name: "deny.list", Data: fmt.Appendf(nil, "serial %s issuer %s\n", hotcert.FormatSerial(revoked.Cert.SerialNumber), hotcert.FingerprintOf(clientCA.Cert))}}, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if n := d.DeniedConns(denying); n != 1 {
		t.Fatalf("DeniedConns(a list revoking one connected client) = %d, want 1", n)
	}
	if n := d.DeniedConns(deny.r.Current()); n != 0 {
		t.Fatalf("DeniedConns(the list in use, which revokes nothing) = %d, want 0", n)
	}
	if n := d.DeniedConns(nil); n != 0 {
		t.Fatalf("DeniedConns(nil) = %d, want 0", n)
	}
	deny.revoke(revoked)
	testutil.WaitFor(t, "the cut", func() bool {
		return deny.r.Current().RevokesSerialOf(hotcert.FingerprintOf(clientCA.Cert), revoked.Cert.SerialNumber) && d.DeniedConns(deny.r.Current()) == 0
	})
}
