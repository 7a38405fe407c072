package httptls

import (
	"net/http"
	"sync"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/tlsconfig"
)

// Transport is an *http.Transport (configure its timeouts and limits as usual)
// whose TLS connections use the certificate and CA bundle current when they are
// dialed, and which closes its idle connections when they change. Call Close when
// it is no longer used.
type Transport struct {
	*http.Transport

	stopOnce sync.Once
	stop     func()
}

// NewTransport returns a Transport based on a clone of http.DefaultTransport with
// HTTP/2 enabled. Direct HTTPS connections are dialed by a tlsconfig.Dialer (crypto/tls
// verifies the server against the current bundle, by name or IP SAN); connections
// through an HTTPS proxy use TLSClientConfig, a tlsconfig.ClientConfig that verifies
// per handshake the same way. Options are those of tlsconfig.NewDialer
// (WithTrust, WithReloadOnDial, WithBase, WithServerName).
//
// When the providers implement hotcert.Notifier, idle connections are closed after
// every change of the client certificate or of the CA bundle.
func NewTransport(p hotcert.Provider, opts ...tlsconfig.Option) *Transport {
	opts = withHTTP(opts)
	d := tlsconfig.NewDialer(p, opts...)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialTLSContext = d.DialContext
	tr.TLSClientConfig = tlsconfig.ClientConfig(p, "", opts...)
	tr.ForceAttemptHTTP2 = true
	t := &Transport{Transport: tr}
	t.stop = d.Notify(tr.CloseIdleConnections)
	return t
}

// Close stops following changes and closes idle connections. It is safe to call
// more than once.
func (t *Transport) Close() error {
	t.stopOnce.Do(t.stop)
	t.CloseIdleConnections()
	return nil
}
