package v1alpha1

import "slices"

// RevocationSpec names certificates that every consumer of the rotation's
// trust must refuse — by serial and issuing CA, or by public key — and the
// objects holding the deny list (and CRLs) those consumers enforce. The
// census then answers "is it refused everywhere, and is no connection of it
// left?" per consumer, in status.revocation and the RevocationEnforced
// condition:
//
//	kubectl wait trustrotation/agents --for=condition=RevocationEnforced --timeout=10m
//
// The controller reads the deny-list objects, computes the version of what
// they hold exactly as every hotcert process computes the version of the list
// it enforces (<prefix>_tls_deny_list_info's version label), and checks that
// it revokes every entry; a consumer proves it enforces such a version, and
// that it has no open connection its list denies
// (<prefix>_tls_deny_list_denied_connections), through the rotation's
// Prometheus: one series per process component, whatever the number of
// revoked certificates or connections.
type RevocationSpec struct {
	// Serials are certificates revoked by serial, each with its issuer.
	Serials []RevokedSerial `json:"serials,omitempty"`
	// SPKI are SHA-256 hashes of revoked public keys (their
	// SubjectPublicKeyInfo's DER; lower-case hex), as deny-list spki entries
	// name them.
	SPKI []string `json:"spki,omitempty"`
	// DenyLists are the objects the consumers read their deny list (and
	// CRLs) from.
	DenyLists []DenyListObject `json:"denyLists"`
}

// RevokedSerial is a certificate revoked by serial: a serial is unique only
// per issuer.
type RevokedSerial struct {
	// Serial in hex, as openssl x509 -serial prints it (colons allowed).
	Serial string `json:"serial"`
	// Issuer is the SHA-256 fingerprint of the issuing CA certificate
	// (lower-case hex of its DER), as a deny-list serial entry names it.
	Issuer string `json:"issuer"`
}

// DenyListObject is an object holding a deny list: exactly one of ConfigMap
// or Secret.
type DenyListObject struct {
	ConfigMap *DenyListKeys `json:"configMap,omitempty"`
	Secret    *DenyListKeys `json:"secret,omitempty"`
}

// DenyListKeys are the keys of a ConfigMap or Secret that consumers read as
// their deny list and CRLs (revocation.FromInputs, or `hotcert server
// --deny-list --crl-file` on its mounted files). With neither key given, both
// deny.list and ca.crl are read (an absent or empty key is no input); with
// one, only it: the version depends on which inputs a consumer reads.
type DenyListKeys struct {
	Namespace   string `json:"namespace"`
	Name        string `json:"name"`
	DenyListKey string `json:"denyListKey,omitempty"`
	CRLKey      string `json:"crlKey,omitempty"`
}

// ConditionRevocationEnforced is the condition type of a TrustRotation with
// spec.revocation: True once every deny-list object revokes every entry, and
// every consumer reports enforcing a list that does with no open connection
// its list denies (or is acknowledged).
const ConditionRevocationEnforced = "RevocationEnforced"

// Reasons of ConditionRevocationEnforced besides ReasonDone,
// ReasonInProgress, ReasonUnproven and ReasonInvalid.
const (
	// ReasonNotListed (False): a deny-list object does not revoke every
	// entry (yet).
	ReasonNotListed = "NotListed"
)

// Revocation states of a consumer.
const (
	// RevocationRefused: it enforces a list that revokes every entry, and no
	// connection its list denies is open.
	RevocationRefused = "refused"
	// RevocationConnectionsLeft: it enforces such a list, but connections
	// its list denies are open (or it does not say).
	RevocationConnectionsLeft = "connectionsLeft"
	// RevocationNotRefused: it enforces a list the census has not seen
	// revoke every entry.
	RevocationNotRefused = "notRefused"
	// RevocationUnknown: it reports no deny list.
	RevocationUnknown = "unknown"
)

// MaxRevocationVersions bounds status.revocation.versions.
const MaxRevocationVersions = 16

// RevocationStatus is the census of a revocation.
type RevocationStatus struct {
	// Summary says where the revocation stands, in one sentence.
	Summary string `json:"summary,omitempty"`
	// Entries are the entries of spec.revocation (serials, then SPKI
	// hashes), each with whether every deny-list object revokes it now.
	Entries []RevocationEntryStatus `json:"entries,omitempty"`
	// DenyLists is what each deny-list object (spec.revocation.denyLists,
	// same order) holds.
	DenyLists []DenyListObjectStatus `json:"denyLists,omitempty"`
	// Versions are the deny-list versions the census has seen revoke every
	// entry, newest first (at most MaxRevocationVersions): a consumer that
	// reports one of them refuses every entry, even before it has the
	// newest list.
	Versions []string `json:"versions,omitempty"`
	// Consumers counts the consumers of the trust (one per container) by
	// evidence and by state.
	Consumers RevocationCounts `json:"consumers"`
	// Stragglers are the consumers that keep RevocationEnforced False, each
	// with the reason (at most MaxStragglers; StragglersOmitted counts the
	// rest).
	Stragglers        []Straggler `json:"stragglers,omitempty"`
	StragglersOmitted int32       `json:"stragglersOmitted,omitempty"`
}

// RevocationEntryStatus is one entry and whether every deny-list object
// revokes it.
type RevocationEntryStatus struct {
	// Entry names it as a deny-list line does ("serial 4A:1F issuer 9f86…",
	// "spki 2c26…").
	Entry  string `json:"entry"`
	Listed bool   `json:"listed"`
}

// DenyListObjectStatus is what one deny-list object holds.
type DenyListObjectStatus struct {
	// Object names it ("ConfigMap team-a/revoked").
	Object string `json:"object"`
	// Version is the version of its list, as consumers report it.
	Version string `json:"version,omitempty"`
	// RevokesAll: its list revokes every entry.
	RevokesAll bool `json:"revokesAll"`
	// Error says why it could not be read, or would be refused.
	Error string `json:"error,omitempty"`
}

// RevocationCounts counts a revocation's consumers.
type RevocationCounts struct {
	// Pods running a consumer; Total consumers.
	Pods  int32 `json:"pods"`
	Total int32 `json:"total"`
	// ByEvidence: reported (its process reports the deny list it
	// enforces), unknown (it reports none), acknowledged.
	ByEvidence RevocationEvidenceCounts `json:"byEvidence"`
	// ByState counts the reporting consumers by what they report.
	ByState RevocationStateCounts `json:"byState"`
	// DeniedConnections sums the open connections that reporting consumers'
	// lists deny.
	DeniedConnections int32 `json:"deniedConnections"`
}

// RevocationEvidenceCounts counts consumers per evidence class.
type RevocationEvidenceCounts struct {
	Reported     int32 `json:"reported"`
	Unknown      int32 `json:"unknown"`
	Acknowledged int32 `json:"acknowledged"`
}

// RevocationStateCounts counts reporting consumers per state.
type RevocationStateCounts struct {
	Refused         int32 `json:"refused"`
	ConnectionsLeft int32 `json:"connectionsLeft"`
	NotRefused      int32 `json:"notRefused"`
}

// DeepCopy returns a deep copy of r.
func (r *RevocationSpec) DeepCopy() *RevocationSpec {
	if r == nil {
		return nil
	}
	out := *r
	out.Serials = slices.Clone(r.Serials)
	out.SPKI = slices.Clone(r.SPKI)
	if r.DenyLists != nil {
		out.DenyLists = make([]DenyListObject, len(r.DenyLists))
		for i, d := range r.DenyLists {
			out.DenyLists[i] = DenyListObject{ConfigMap: clonePtr(d.ConfigMap), Secret: clonePtr(d.Secret)}
		}
	}
	return &out
}

// DeepCopy returns a deep copy of r.
func (r *RevocationStatus) DeepCopy() *RevocationStatus {
	if r == nil {
		return nil
	}
	out := *r
	out.Entries = slices.Clone(r.Entries)
	out.DenyLists = slices.Clone(r.DenyLists)
	out.Versions = slices.Clone(r.Versions)
	out.Stragglers = slices.Clone(r.Stragglers)
	return &out
}
