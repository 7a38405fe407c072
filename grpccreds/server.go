package grpccreds

import (
	"google.golang.org/grpc/credentials"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/tlsconfig"
)

// NewServer returns server transport credentials presenting the current
// certificate of p on every new connection. Client certificates are requested only
// if a base config (tlsconfig.WithBase) asks for them; see NewMTLSServer.
func NewServer(p hotcert.Provider, opts ...tlsconfig.Option) credentials.TransportCredentials {
	return credentials.NewTLS(tlsconfig.ServerConfig(p, withH2(opts)...))
}

// NewMTLSServer is NewServer requiring and verifying a client certificate against
// the current CA bundle (of p, or of the provider given with tlsconfig.WithTrust) on
// every new connection.
func NewMTLSServer(p hotcert.Provider, opts ...tlsconfig.Option) credentials.TransportCredentials {
	return credentials.NewTLS(tlsconfig.MTLSServerConfig(p, withH2(opts)...))
}

// withH2 puts "h2" into the prepared configs themselves, so that grpc-go's per
// handshake defaults have nothing to append.
func withH2(opts []tlsconfig.Option) []tlsconfig.Option {
	return append(append([]tlsconfig.Option(nil), opts...), tlsconfig.WithNextProtos("h2"))
}
