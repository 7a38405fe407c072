// Package trustmanager plays the three-step CA rotation with cert-manager's
// trust-manager, as a platform runs it: a Bundle with one source per CA
// writes the union to the ConfigMap hotcert's agents read (step 1 adds the
// new CA's source; step 2 switches the server's leaf to the new CA; step 3
// removes the old CA's source). Its test runs the real trust-manager binary
// (built by hack/build-trust-manager.sh) against a real API server.
package trustmanager
