// Package evidence gathers what the census (package census) judges: what
// hotcert processes report, from a Prometheus server (one query for every
// pod) or from a pod's own metrics endpoint, and what a server serves, from a
// real TLS handshake. It reads no Kubernetes object: the controller tells it
// where to look.
package evidence
