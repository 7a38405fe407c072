package httptls

import (
	"crypto/tls"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/tlsconfig"
)

// ServerConfig returns a config for http.Server.TLSConfig that presents the current
// certificate of p and negotiates HTTP/2 and HTTP/1.1. Options are those of
// tlsconfig.ServerConfig.
func ServerConfig(p hotcert.Provider, opts ...tlsconfig.Option) *tls.Config {
	return tlsconfig.ServerConfig(p, withHTTP(opts)...)
}

// MTLSServerConfig is ServerConfig requiring a client certificate that verifies
// against the current CA bundle.
func MTLSServerConfig(p hotcert.Provider, opts ...tlsconfig.Option) *tls.Config {
	return tlsconfig.MTLSServerConfig(p, withHTTP(opts)...)
}

func withHTTP(opts []tlsconfig.Option) []tlsconfig.Option {
	return append(append([]tlsconfig.Option(nil), opts...), tlsconfig.WithNextProtos("h2", "http/1.1"))
}
