package census

import (
	"fmt"
	"time"
)

// Kind is the kind of an object the census follows.
type Kind string

// Object kinds.
const (
	KindConfigMap          Kind = "ConfigMap"
	KindSecret             Kind = "Secret"
	KindClusterTrustBundle Kind = "ClusterTrustBundle"
	// KindPodCertificate is the certificate the kubelet got for one pod's
	// podCertificate projection of a signer (Namespace and Name are the
	// pod's): what the newest issued PodCertificateRequest holds.
	KindPodCertificate Kind = "PodCertificate"
)

// Role says what an object is to its consumers.
type Role int

const (
	// RoleTrust: the object carries the trust bundle; its consumers verify
	// peers against it.
	RoleTrust Role = iota
	// RoleServer: the object holds a server certificate; its consumers serve it.
	RoleServer
)

// Object is one concrete object the census follows: a key of a ConfigMap or
// Secret, or a ClusterTrustBundle (by name, or a signer's: SignerName with
// Name empty, the union of the signer's bundles whose labels match
// Selector). A trust-manager Bundle expands into several, all with the same
// Origin; so does a signer's entry, into one object per label selector its
// consumers' projections use (each gets the union of the bundles its own
// selector matches, which is what the kubelet writes into the pod).
type Object struct {
	Kind       Kind
	Namespace  string
	Name       string
	Key        string
	SignerName string
	// Selector is a signer's object's label selector, as
	// labels.Selector.String() prints it ("" matches every bundle).
	Selector string
	Role     Role
	// Origin is the index of the spec entry it comes from (spec.trust for
	// RoleTrust, spec.serverCertificates for RoleServer).
	Origin int
}

// String names o for messages: "ConfigMap team-a/ca key ca.crt",
// "ClusterTrustBundle agents-2026", "the ClusterTrustBundles of signer
// example.com/agents matching ring=1", "the example.com/cp pod certificate
// of pod team-a/cp-0".
func (o Object) String() string {
	switch {
	case o.Kind == KindClusterTrustBundle && o.Name == "" && o.Selector != "":
		return "the ClusterTrustBundles of signer " + o.SignerName + " matching " + o.Selector
	case o.Kind == KindClusterTrustBundle && o.Name == "":
		return "the ClusterTrustBundles of signer " + o.SignerName
	case o.Kind == KindClusterTrustBundle:
		return "ClusterTrustBundle " + o.Name
	case o.Kind == KindPodCertificate:
		return fmt.Sprintf("the %s pod certificate of pod %s/%s", o.SignerName, o.Namespace, o.Name)
	}
	return fmt.Sprintf("%s %s/%s key %s", o.Kind, o.Namespace, o.Name, o.Key)
}

// State is what an object holds now, and since when the census knows it.
type State struct {
	Object
	// Err says why it could not be read ("" when it was).
	Err string
	// HoldsNew and HoldsOld: for a trust object, whether its bundle holds a
	// certificate of the new (old) CA; for a server certificate, whether its
	// leaf is issued by the new (old) CA.
	HoldsNew, HoldsOld bool
	// LeafSHA256 (lower-case hex) and LeafSerial (openssl's format) are a
	// server certificate's leaf's.
	LeafSHA256, LeafSerial string
	// NewSince is when the census first saw it hold the new CA (zero while it
	// does not), OldGoneSince when it first saw it without the old one.
	NewSince, OldGoneSince time.Time
}

// CA is one side of the rotation.
type CA struct {
	// Name names it in messages ("CA-2026").
	Name string
	// SHA256 holds the fingerprints (lower-case hex) of its certificates.
	SHA256 map[string]bool
	// Subjects holds their subjects (as x509's Name.String prints them), to
	// tell a reported leaf's issuer.
	Subjects map[string]bool
}

// How is how a container consumes an object.
type How string

// Ways of consuming an object. Volume, Projected, ClusterTrustBundle and
// PodCertificate follow the object's changes (after the kubelet's delay);
// SubPath and Env never do.
const (
	HowVolume             How = "volume"
	HowProjected          How = "projected"
	HowClusterTrustBundle How = "clusterTrustBundle"
	HowPodCertificate     How = "podCertificate"
	HowSubPath            How = "subPath"
	HowEnv                How = "env"
)

// updated reports whether the kubelet updates a running container's copy.
func (h How) updated() bool { return h != HowSubPath && h != HowEnv }

// Use is one container's use of one object.
type Use struct {
	Container string
	// Object is the index of the object in Input.Objects.
	Object int
	How    How
}

// Pod is a pod that consumes at least one object.
type Pod struct {
	Namespace, Name string
	Labels          map[string]string
	// Started holds the start time of each running container and sidecar
	// (one that is not running is absent), one entry per container: a slice, not
	// a map, so that the pods of a census can share their records' (a map
	// per pod was a census's largest allocation after the verdicts).
	Started []Start
	Uses    []Use
}

// Start is when a running container started (StartOf makes one).
type Start struct {
	Container string
	unixNano  int64 // 8 bytes where a time.Time takes 24: one per container of 10,000 pods
}

// StartOf is when container started: at.
func StartOf(container string, at time.Time) Start {
	return Start{Container: container, unixNano: at.UnixNano()}
}

// At is when it started, in UTC.
func (s Start) At() time.Time { return time.Unix(0, s.unixNano).UTC() }

// StartedAt is when container started (ok false when it is not running).
func (p Pod) StartedAt(container string) (at time.Time, ok bool) {
	for _, s := range p.Started {
		if s.Container == container {
			return s.At(), true
		}
	}
	return time.Time{}, false
}

// Key is "namespace/name".
func (p Pod) Key() string { return p.Namespace + "/" + p.Name }

// Report is what the hotcert processes of a pod report (the
// hotcert_tls_cert_info and hotcert_tls_ca_certificate_info series of one
// container, or of the pod when the series do not name a container).
type Report struct {
	// Container is "" when the series do not name it.
	Container string
	// CAs are the fingerprints of every CA of every component's bundle.
	CAs map[string]bool
	// Leaves are the leaves its components hold.
	Leaves []Leaf
}

// Leaf is a reported leaf.
type Leaf struct {
	SHA256 string
	Issuer string
}

// Served is what a handshake to one endpoint of a pod showed.
type Served struct {
	// Endpoint is "ip:port".
	Endpoint string
	// Err says why the handshake failed ("" when it succeeded).
	Err string
	// Serial of the served leaf (openssl's format), for messages.
	Serial string
	// IssuedByNew and IssuedByOld say which CA verifies the served chain.
	IssuedByNew, IssuedByOld bool
	// HostnameOK is false when the leaf does not name the server name.
	HostnameOK bool
}

// Input is what one census is made of.
type Input struct {
	OldCA, NewCA CA
	// Objects are the concrete objects followed, with what they hold.
	Objects []State
	// Pods are the pods that consume them.
	Pods []Pod
	// Reports are what each pod (by Pod.Key) reports.
	Reports map[string][]Report
	// Served are the handshakes to each pod's serving endpoints (by Pod.Key).
	Served map[string][]Served
	// VolumeDelay and CTBDelay bound how long the kubelet takes to deliver
	// a change to a running pod's volume, env or subPath (for a container
	// that starts), and to a clusterTrustBundle projection.
	VolumeDelay, CTBDelay time.Duration
	// Acknowledged returns why a person vouches for the pod ("" when none
	// does). Nil: none.
	Acknowledged func(Pod) string
	// MinConsumers keeps every step from being done with fewer consumers.
	MinConsumers int
	// KeepConsumers keeps every judged consumer in Result.Consumers, each
	// fact with why it is not proven (a driven rotation names every
	// consumer that reads at start). Without it a census keeps the counts
	// and the stragglers a status shows, and says why of those only: at
	// 10,000 consumers the verdicts and their sentences were most of what a
	// census allocated.
	KeepConsumers bool
}
