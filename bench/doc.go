// Package bench holds benchmarks that compare hotcert with other certificate
// reloaders (controller-runtime's certwatcher, go-spiffe's tlsconfig, grpc-go's
// advancedtls with the pemfile provider). It is a module of its own so that those
// dependencies never reach the dependency graph of hotcert's users.
//
// Run from this directory:
//
//	go test -run '^$' -bench . -benchtime=3000x
//
// Each benchmark interleaves its rows in one process and reports each row's CPU time
// per handshake relative to the first (static) row, with the 95% confidence
// half-width of those ratios.
package bench
