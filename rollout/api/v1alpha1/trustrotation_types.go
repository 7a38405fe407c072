package v1alpha1

import (
	_ "embed"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TrustRotationCRDYAML is the CustomResourceDefinition of TrustRotation.
//
//go:embed crd/hotcert.dev_trustrotations.yaml
var TrustRotationCRDYAML []byte

// TrustRotation (cluster-scoped: the consumers of a CA live in every
// namespace) names a CA rotation — the CA it replaces, the new one, the
// objects that carry the trust, the server certificates issued under it — and
// its status is the census: every pod that consumes those objects, what each
// holds and how that is known, and one condition per step of the three-step
// rotation (StepAddNewCA, StepSwitchServerCert, StepRemoveOldCA), so that
//
//	kubectl wait trustrotation/ca-2026 --for=condition=add-new-ca --timeout=15m
//
// gates the next step of a pipeline. In mode Observe (the default) the
// controller changes nothing: it counts. In mode Drive it also takes the
// steps, each once the census proves the one before it (see DriveSpec).
type TrustRotation struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              TrustRotationSpec   `json:"spec"`
	Status            TrustRotationStatus `json:"status,omitempty"`
}

// Step names, the condition types of a TrustRotation: the three steps of a
// CA rotation with a union bundle, in order, named as `hotcert rotation
// status` names them. A step's condition is True once the step is done
// everywhere, which makes the next one safe.
const (
	// StepAddNewCA: every trust object holds the new CA, and every consumer
	// is proven to trust it.
	StepAddNewCA = "add-new-ca"
	// StepSwitchServerCert: every server certificate Secret holds a leaf
	// issued by the new CA, and every pod serving it is proven to serve it.
	StepSwitchServerCert = "switch-server-cert"
	// StepRemoveOldCA: no trust object holds the old CA, and every consumer
	// is proven to have dropped it.
	StepRemoveOldCA = "remove-old-ca"
)

// Condition reasons of the step conditions.
const (
	// ReasonDone (True): the step is done everywhere.
	ReasonDone = "Done"
	// ReasonInProgress (False): the step is safe to take, or taken, and not
	// seen everywhere yet; the message names the stragglers.
	ReasonInProgress = "InProgress"
	// ReasonNotSafe (False): a step before it is not done.
	ReasonNotSafe = "NotSafe"
	// ReasonUnproven (False): what is left are consumers whose state cannot
	// be proven (evidence never or unknown): restart them, or acknowledge
	// them (spec.acknowledged).
	ReasonUnproven = "Unproven"
	// ReasonInvalid (False, every step): the spec cannot be acted on (a CA
	// that does not load, a trust object that cannot be read); the message
	// says why.
	ReasonInvalid = "Invalid"
)

// RotationMode is what the controller does about a TrustRotation.
type RotationMode string

// Modes.
const (
	// ModeObserve keeps the census and the conditions, and changes nothing.
	ModeObserve RotationMode = "Observe"
	// ModeDrive also carries the rotation out, step by proven step, as
	// spec.drive declares (see DriveSpec).
	ModeDrive RotationMode = "Drive"
)

// TrustRotationSpec names the rotation and where its consumers are.
type TrustRotationSpec struct {
	// Mode is Observe (the default) or Drive.
	Mode RotationMode `json:"mode,omitempty"`
	// OldCA is the CA being replaced, NewCA its replacement.
	OldCA CA `json:"oldCA"`
	NewCA CA `json:"newCA"`
	// Trust are the objects that carry the trust bundle to its consumers.
	Trust []TrustObject `json:"trust"`
	// ServerCertificates are the Secrets holding server certificates issued
	// under the rotated CA: the pods that mount them serve them.
	ServerCertificates []ServerCertificate `json:"serverCertificates,omitempty"`
	// Evidence says where the census reads what hotcert processes report.
	Evidence Evidence `json:"evidence,omitempty"`
	// Propagation bounds how long the kubelet takes to deliver a change of a
	// trust object to a running pod's volume.
	Propagation Propagation `json:"propagation,omitempty"`
	// Acknowledged are consumers a person has checked by other means: they
	// are counted apart (acknowledged) and hold no step back.
	Acknowledged []Acknowledgement `json:"acknowledged,omitempty"`
	// MinConsumers, if set, keeps every step from being done while the census
	// finds fewer consumers (a fleet that is not there yet proves nothing).
	MinConsumers int32 `json:"minConsumers,omitempty"`

	// Drive says how the controller carries the rotation out (mode Drive).
	Drive *DriveSpec `json:"drive,omitempty"`

	// Revocation names certificates every consumer of the trust must refuse
	// (see RevocationSpec).
	Revocation *RevocationSpec `json:"revocation,omitempty"`
}

// CA names one side of the rotation: exactly one of SHA256, PEM or From.
// The served-leaf check (switch-server-cert) verifies chains, so it needs
// the certificates: PEM or From.
type CA struct {
	// Name is how messages name the CA (default: the first certificate's
	// common name, else its first fingerprint's first 12 digits).
	Name string `json:"name,omitempty"`
	// SHA256 are the fingerprints of its certificates' DER encoding,
	// lower-case hex, as hotcert_tls_ca_certificate_info's sha256 label.
	SHA256 []string `json:"sha256,omitempty"`
	// PEM holds its certificates.
	PEM string `json:"pem,omitempty"`
	// From is a ConfigMap or Secret key holding its certificates (PEM).
	From *KeyRef `json:"from,omitempty"`
}

// KeyRef names a key of a ConfigMap or Secret.
type KeyRef struct {
	// Kind is ConfigMap or Secret.
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Key       string `json:"key"`
}

// TrustObject is one object carrying the trust bundle: exactly one of
// ConfigMap, Secret, ClusterTrustBundle or Bundle.
type TrustObject struct {
	// ConfigMap is a key of a ConfigMap.
	ConfigMap *ObjectKey `json:"configMap,omitempty"`
	// Secret is a key of a Secret.
	Secret *ObjectKey `json:"secret,omitempty"`
	// ClusterTrustBundle is a certificates.k8s.io ClusterTrustBundle, by
	// name, or every one of a signer whose labels match a selector (as a
	// clusterTrustBundle projected volume source selects them).
	ClusterTrustBundle *ClusterTrustBundleRef `json:"clusterTrustBundle,omitempty"`
	// Bundle is a trust-manager Bundle (trust.cert-manager.io/v1alpha1): its
	// targets, the ConfigMap (or Secret) of the Bundle's name and target key
	// in every namespace it selects.
	Bundle *BundleRef `json:"bundle,omitempty"`
}

// ObjectKey is one key of a namespaced ConfigMap or Secret.
type ObjectKey struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Key       string `json:"key"`
}

// ClusterTrustBundleRef selects ClusterTrustBundles: Name, or SignerName
// with an optional LabelSelector.
type ClusterTrustBundleRef struct {
	Name          string                `json:"name,omitempty"`
	SignerName    string                `json:"signerName,omitempty"`
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
}

// BundleRef names a trust-manager Bundle.
type BundleRef struct {
	Name string `json:"name"`
}

// ServerCertificate is a Secret holding a server certificate (chain) issued
// under the rotated CA (Namespace and Name), or a signer whose pod
// certificates are issued under it (SignerName): every pod with a
// podCertificate projection of that signer presents the certificate the
// kubelet got for it, which the newest issued PodCertificateRequest
// (certificates.k8s.io) of the pod and signer holds.
type ServerCertificate struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	// SignerName is the signer of podCertificate projections (instead of a
	// Secret).
	SignerName string `json:"signerName,omitempty"`
	// Key holds the chain, leaf first (default tls.crt).
	Key string `json:"key,omitempty"`
	// Port is the EndpointSlice port name (or number) on which the pods
	// mounting the Secret serve it; the census dials each ready endpoint of
	// every Service selecting them there. Without it, every port of those
	// EndpointSlices is tried.
	Port string `json:"port,omitempty"`
	// ServerName is the name clients dial, sent as SNI and checked against
	// the served leaf (default: none sent, none checked).
	ServerName string `json:"serverName,omitempty"`
}

// Evidence says where hotcert processes' reports are read. With neither, the
// census relies on handshakes and start times only.
type Evidence struct {
	// Prometheus is the cluster's Prometheus: one query per census reads
	// every pod's hotcert_tls_cert_info and hotcert_tls_ca_certificate_info.
	Prometheus *PrometheusSource `json:"prometheus,omitempty"`
	// Scrape reads each consuming pod's metrics endpoint directly, where there
	// is no Prometheus.
	Scrape *ScrapeSource `json:"scrape,omitempty"`
}

// PrometheusSource is a Prometheus HTTP API and how its series name pods.
type PrometheusSource struct {
	// URL is the API's base (e.g. http://prometheus.monitoring:9090).
	URL string `json:"url"`
	// NamespaceLabel and PodLabel are the target labels naming a series' pod
	// (default namespace and pod, as the usual kubernetes_sd relabeling
	// sets them); ContainerLabel names its container (default container).
	NamespaceLabel string `json:"namespaceLabel,omitempty"`
	PodLabel       string `json:"podLabel,omitempty"`
	ContainerLabel string `json:"containerLabel,omitempty"`
	// MetricPrefix is the processes' metric prefix (default hotcert).
	MetricPrefix string `json:"metricPrefix,omitempty"`
}

// ScrapeSource is where a pod serves its metrics.
type ScrapeSource struct {
	// Port is the container port name or number.
	Port string `json:"port"`
	// Path defaults to /metrics.
	Path string `json:"path,omitempty"`
	// MetricPrefix is the processes' metric prefix (default hotcert).
	MetricPrefix string `json:"metricPrefix,omitempty"`
}

// Propagation is how long, at most, the kubelet takes to deliver a change of
// an object to a running pod. A container that started at least this long
// after the census saw the change read the new content at start.
type Propagation struct {
	// Volume covers Secret and ConfigMap volumes, projected sources and env
	// (default 2m: the kubelet's sync period, 1m re-queued with up to 50%
	// jitter, plus its watch cache's lag). Raise it with the kubelet's
	// --sync-frequency.
	Volume *metav1.Duration `json:"volume,omitempty"`
	// ClusterTrustBundle covers clusterTrustBundle projections (default 6m:
	// the kubelet caches them for minutes; 5–6 minutes were measured).
	ClusterTrustBundle *metav1.Duration `json:"clusterTrustBundle,omitempty"`
}

// Acknowledgement names consumers a person vouches for.
type Acknowledgement struct {
	// Namespace of the pods.
	Namespace string `json:"namespace"`
	// Selector selects the pods by label (every pod of the namespace when
	// empty).
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// Reason says why (shown in the census).
	Reason string `json:"reason"`
}

// TrustRotationStatus is the census.
type TrustRotationStatus struct {
	// ObservedGeneration is the generation of the spec the census describes.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Next is the first step not done ("" once the rotation is complete).
	Next string `json:"next,omitempty"`
	// Summary is where the rotation stands, in one sentence.
	Summary string `json:"summary,omitempty"`
	// Trust is what each trust object (spec.trust, same order) holds.
	Trust []TrustObjectStatus `json:"trust,omitempty"`
	// ServerCertificates is what each server certificate Secret
	// (spec.serverCertificates, same order) holds.
	ServerCertificates []ServerCertificateStatus `json:"serverCertificates,omitempty"`
	// Consumers counts the consumers by evidence and by state.
	Consumers ConsumerCounts `json:"consumers,omitempty"`
	// Stragglers are the consumers that hold the next step back, each with
	// the reason (at most MaxStragglers; StragglersOmitted counts the rest).
	Stragglers        []Straggler `json:"stragglers,omitempty"`
	StragglersOmitted int32       `json:"stragglersOmitted,omitempty"`
	// Conditions: one per step (StepAddNewCA, StepSwitchServerCert,
	// StepRemoveOldCA).
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Drive is the progress of a driven rotation (mode Drive).
	Drive *DriveStatus `json:"drive,omitempty"`

	// Revocation is the census of spec.revocation.
	Revocation *RevocationStatus `json:"revocation,omitempty"`
}

// MaxStragglers bounds status.stragglers.
const MaxStragglers = 50

// TrustObjectStatus is what one trust object holds. For a Bundle or a
// ClusterTrustBundle selector, Objects counts the objects found and the
// holding counts how many of them hold each CA.
type TrustObjectStatus struct {
	// Object names it ("ConfigMap team-a/ca key ca.crt", "Bundle ca").
	Object  string `json:"object"`
	Objects int32  `json:"objects"`
	HoldNew int32  `json:"holdNew"`
	HoldOld int32  `json:"holdOld"`
	// NewSince is when the census first saw every object hold the new CA,
	// OldGoneSince when it first saw none hold the old one: a container
	// started at least the propagation delay after read the change at start.
	NewSince     *metav1.Time `json:"newSince,omitempty"`
	OldGoneSince *metav1.Time `json:"oldGoneSince,omitempty"`
	// Error says why it could not be read.
	Error string `json:"error,omitempty"`
}

// ServerCertificateStatus is what one server certificate Secret holds, or,
// for a signer's pod certificates, how many pods project one and how many of
// those hold a leaf of the new CA.
type ServerCertificateStatus struct {
	// Secret is "namespace/name" ("" for a signer's pod certificates).
	Secret string `json:"secret"`
	// SignerName, Pods and HoldNew: a signer's pod certificates.
	SignerName string `json:"signerName,omitempty"`
	Pods       int32  `json:"pods,omitempty"`
	HoldNew    int32  `json:"holdNew,omitempty"`
	// SHA256 (lower-case hex) and Serial (openssl's format) of its leaf.
	SHA256 string `json:"sha256,omitempty"`
	Serial string `json:"serial,omitempty"`
	// IssuedBy is "new", "old" or "neither".
	IssuedBy string `json:"issuedBy,omitempty"`
	// NewSince is when the census first saw it hold a leaf of the new CA.
	NewSince *metav1.Time `json:"newSince,omitempty"`
	Error    string       `json:"error,omitempty"`
}

// Evidence classes: how a consumer's state is known. Only the first three
// prove anything.
const (
	// EvidenceReported: the consumer's process runs the hotcert library and
	// reports what it holds.
	EvidenceReported = "reported"
	// EvidenceServed: a TLS handshake to the consumer shows the leaf it serves.
	EvidenceServed = "served"
	// EvidenceRestarted: the consumer reads at start, and its containers
	// started after the change could have reached them.
	EvidenceRestarted = "restarted"
	// EvidenceNever: it consumes through subPath or env, which the kubelet
	// never updates, and started before the change.
	EvidenceNever = "never"
	// EvidenceUnknown: anything else (it reports nothing and started before
	// the change, it is not running, its report cannot be told apart).
	EvidenceUnknown = "unknown"
	// EvidenceAcknowledged: a person vouched for it (spec.acknowledged).
	EvidenceAcknowledged = "acknowledged"
)

// ConsumerCounts counts the consumers. A consumer is one container's use of
// one trust object (or server certificate Secret).
type ConsumerCounts struct {
	// Pods running a consumer; Total consumers.
	Pods  int32 `json:"pods"`
	Total int32 `json:"total"`
	// ByEvidence counts them by the weakest evidence of what the rotation
	// needs of them.
	ByEvidence EvidenceCounts `json:"byEvidence"`
	// ByState counts them by what they are known or inferred to hold.
	ByState StateCounts `json:"byState"`
}

// EvidenceCounts counts consumers per evidence class.
type EvidenceCounts struct {
	Reported     int32 `json:"reported"`
	Served       int32 `json:"served"`
	Restarted    int32 `json:"restarted"`
	Never        int32 `json:"never"`
	Unknown      int32 `json:"unknown"`
	Acknowledged int32 `json:"acknowledged"`
}

// StateCounts counts consumers per state: for a trust consumer, whether it
// trusts the new CA, the old one, both or neither; for a server, whether it
// serves a leaf of the new CA (New) or not (Old); Unknown when not known.
type StateCounts struct {
	New     int32 `json:"new"`
	Both    int32 `json:"both"`
	Old     int32 `json:"old"`
	Neither int32 `json:"neither"`
	Unknown int32 `json:"unknown"`
}

// Straggler is a consumer holding a step back.
type Straggler struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	Container string `json:"container,omitempty"`
	// Object is the trust object or server certificate Secret it consumes.
	Object string `json:"object"`
	// How it consumes it: volume, projected, clusterTrustBundle,
	// podCertificate, subPath or env.
	How string `json:"how"`
	// Evidence is the evidence class of what is known of it.
	Evidence string `json:"evidence"`
	// Step is the step it holds back.
	Step   string `json:"step"`
	Reason string `json:"reason"`
}

// TrustRotationList is a list of TrustRotations.
type TrustRotationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TrustRotation `json:"items"`
}
