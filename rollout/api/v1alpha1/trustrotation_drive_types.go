package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// DriveSpec is how the controller carries a rotation out (mode Drive): it
// writes the union of both CAs into Bundle (add-new-ca), switches the server
// certificates as Reissue says (switch-server-cert), then removes the old CA
// from Bundle (remove-old-ca), each step once the census proves the one
// before it done everywhere. A consumer whose state cannot be proven (never,
// unknown) holds the rotation back, named, until it restarts or is
// acknowledged (spec.acknowledged).
type DriveSpec struct {
	// Bundle is the trust object the controller writes: one of spec.trust.
	Bundle DriveBundle `json:"bundle"`
	// Reissue is how the server certificates get a leaf of the new CA.
	Reissue Reissue `json:"reissue"`
	// Canary, if set, switches a share of the cert-manager Certificates
	// first and soaks before switching the rest.
	Canary *Canary `json:"canary,omitempty"`
	// Action is Run (the default), Pause (take no step, write nothing),
	// Abort (stop for good, leaving every object as it is) or Rollback (back
	// out while the old CA is still in the bundle: the Certificates get their
	// issuers back, then the new CA leaves the bundle).
	Action DriveAction `json:"action,omitempty"`
	// DryRun computes the plan (status.drive.plan) and writes nothing else.
	DryRun bool `json:"dryRun,omitempty"`
	// DeadlineMargin: a rotation not complete this long before the old CA
	// expires is reported (a Warning Event and status.drive.deadline),
	// never silently (default 168h).
	DeadlineMargin *metav1.Duration `json:"deadlineMargin,omitempty"`
	// HandshakeFailureThreshold stops the rotation (Phase Stopped, a
	// Warning Event) once the consumers of the rotation report this many
	// handshake failures that mean "not trusted" (reasons unknown_authority
	// and peer_rejected) since the current step's last write, as
	// spec.evidence.prometheus holds them (default 3; 0 turns the stop off).
	HandshakeFailureThreshold *int32 `json:"handshakeFailureThreshold,omitempty"`
}

// DefaultHandshakeFailureThreshold is spec.drive.handshakeFailureThreshold's
// default.
const DefaultHandshakeFailureThreshold = 3

// DriveAction is what the user asks of a driven rotation.
type DriveAction string

// Drive actions.
const (
	ActionRun      DriveAction = "Run"
	ActionPause    DriveAction = "Pause"
	ActionAbort    DriveAction = "Abort"
	ActionRollback DriveAction = "Rollback"
)

// DriveBundle is the object the controller writes the bundle into: exactly
// one of ConfigMap or Secret (a key that spec.trust also names), Bundle or
// ClusterTrustBundle.
type DriveBundle struct {
	ConfigMap *ObjectKey `json:"configMap,omitempty"`
	Secret    *ObjectKey `json:"secret,omitempty"`
	// Bundle is a trust-manager Bundle that spec.trust names: the controller
	// edits its sources, and the census proves the step through its targets.
	Bundle *DriveTrustManagerBundle `json:"bundle,omitempty"`
	// ClusterTrustBundle is a ClusterTrustBundle the controller publishes
	// (and creates if it is missing), named by spec.trust by its name or
	// its signer.
	ClusterTrustBundle *DriveClusterTrustBundle `json:"clusterTrustBundle,omitempty"`
}

// DriveTrustManagerBundle names the trust-manager Bundle a rotation edits.
// add-new-ca adds an inLine source holding the new CA (none is added when
// an inLine source holds it already); remove-old-ca takes the old CA's
// certificates out of the inLine sources, and removes the configMap and
// secret sources (by name and key, in the trust namespace) that hold
// nothing else. A source holding the old CA beside other certificates, or
// selecting objects by labels, is not edited: the census sees the old CA
// in the targets, and the step waits, named.
type DriveTrustManagerBundle struct {
	Name string `json:"name"`
	// TrustNamespace is trust-manager's trust namespace (its
	// --trust-namespace, default cert-manager), where the Bundle's
	// configMap and secret sources are read.
	TrustNamespace string `json:"trustNamespace,omitempty"`
}

// DefaultTrustNamespace is trust-manager's default trust namespace.
const DefaultTrustNamespace = "cert-manager"

// DriveClusterTrustBundle is the ClusterTrustBundle a rotation publishes.
type DriveClusterTrustBundle struct {
	Name string `json:"name"`
	// SignerName is its spec.signerName (for projections that select by
	// signer); the API server then requires the name to start with the
	// signer name ("/" written ":") and a ":", and the controller to be
	// allowed to attest for the signer.
	SignerName string `json:"signerName,omitempty"`
}

// Reissue is how the server certificates are re-issued: exactly one of
// CertManager or External.
type Reissue struct {
	// CertManager switches the issuerRef of every cert-manager Certificate
	// whose spec.secretName is one of spec.serverCertificates; cert-manager
	// then issues into the Secret.
	CertManager *CertManagerReissue `json:"certManager,omitempty"`
	// External: someone else issues; the controller waits for the census to
	// see every server serve a leaf of the new CA.
	External *ExternalReissue `json:"external,omitempty"`
}

// CertManagerReissue names the issuer of the new CA.
type CertManagerReissue struct {
	IssuerRef IssuerRef `json:"issuerRef"`
}

// IssuerRef is a cert-manager issuer reference.
type IssuerRef struct {
	Name string `json:"name"`
	// Kind is Issuer or ClusterIssuer (cert-manager's default: Issuer).
	Kind  string `json:"kind,omitempty"`
	Group string `json:"group,omitempty"`
}

// ExternalReissue is re-issuing left to someone else.
type ExternalReissue struct{}

// Canary is the share of Certificates switched first: Percent of them
// (rounded up, in the order of spec.serverCertificates) or those whose
// labels match Selector.
type Canary struct {
	Percent  int32                 `json:"percent,omitempty"`
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// Soak is how long the canary serves the new leaf, proven, before the
	// rest are switched (default 0).
	Soak *metav1.Duration `json:"soak,omitempty"`
}

// DriveStatus is a driven rotation's progress: everything the controller
// needs to resume where it was after a restart.
type DriveStatus struct {
	// Phase is one of the Phase* values.
	Phase string `json:"phase,omitempty"`
	// Step is the step being taken ("" before the first, and once complete).
	Step string `json:"step,omitempty"`
	// Message says what the controller does or waits for, naming the
	// consumers that hold it back.
	Message string `json:"message,omitempty"`
	// Steps records, per step taken (and "rollback"), when it was started,
	// written and done.
	Steps []DriveStepStatus `json:"steps,omitempty"`
	// Issuers are the Certificates' issuers as they were before the switch,
	// recorded before any was changed (for Rollback).
	Issuers []RecordedIssuer `json:"issuers,omitempty"`
	// Plan is what the controller will write and wait for, in order.
	Plan []string `json:"plan,omitempty"`
	// Deadline is when the rotation should be complete: the old CA's
	// earliest expiry less spec.drive.deadlineMargin.
	Deadline *metav1.Time `json:"deadline,omitempty"`
	// DeadlinePassed: the deadline passed before the rotation completed
	// (reported once, with a Warning Event).
	DeadlinePassed bool `json:"deadlinePassed,omitempty"`
	// ObservedGeneration is the generation of the spec this progress
	// follows; a Stopped rotation resumes once the spec changes.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// FailuresSince is when the handshake failures that stop the rotation
	// are counted from: the current step's last write, or the resume after
	// a stop.
	FailuresSince *metav1.Time `json:"failuresSince,omitempty"`
}

// Phases of a driven rotation.
const (
	PhaseDryRun      = "DryRun"
	PhaseRunning     = "Running"
	PhaseWaiting     = "Waiting"
	PhasePaused      = "Paused"
	PhaseStopped     = "Stopped"
	PhaseAborted     = "Aborted"
	PhaseRollingBack = "RollingBack"
	PhaseRolledBack  = "RolledBack"
	PhaseComplete    = "Complete"
)

// DriveStepStatus is one step's progress. Started is written before
// anything the step changes; Written once its objects are written (the
// canary's and the rest's apart for switch-server-cert); Done once the
// census proves it everywhere.
type DriveStepStatus struct {
	Name          string       `json:"name"`
	Started       *metav1.Time `json:"started,omitempty"`
	CanaryWritten *metav1.Time `json:"canaryWritten,omitempty"`
	CanaryDone    *metav1.Time `json:"canaryDone,omitempty"`
	Written       *metav1.Time `json:"written,omitempty"`
	Done          *metav1.Time `json:"done,omitempty"`
}

// StepRollback names the rollback's entry in DriveStatus.Steps: its
// CanaryWritten is when the Certificates got their issuers back, Written
// when the new CA left the bundle.
const StepRollback = "rollback"

// RecordedIssuer is one Certificate's issuer before the switch.
type RecordedIssuer struct {
	// Certificate is "namespace/name".
	Certificate string    `json:"certificate"`
	IssuerRef   IssuerRef `json:"issuerRef"`
	// Canary: it is switched with the canary.
	Canary bool `json:"canary,omitempty"`
}
