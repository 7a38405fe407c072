// Package v1alpha1 is the hotcert.dev/v1alpha1 API: ReferenceRule, which tells
// hotcert how a custom resource takes part in a chain of references from a
// Secret or ConfigMap to the workloads that consume it, so that hotcert rolls
// those workloads without any change to the operator that owns them; and
// TrustRotation, a CA rotation whose status is the census of its consumers
// (see TrustRotation).
//
// kagent's chain (Secret → ModelConfig → Agent → Deployment) takes two rules:
//
//	apiVersion: hotcert.dev/v1alpha1
//	kind: ReferenceRule
//	metadata: {name: kagent-modelconfig}
//	spec:
//	  target: {group: kagent.dev, version: v1alpha2, kind: ModelConfig}
//	  secretRefs:
//	  - name: {path: spec.apiKeySecret}
//	    key: {path: spec.apiKeySecretKey}
//	  - name: {path: spec.tls.caCertSecretRef}
//	    key: {path: spec.tls.caCertSecretKey}
//	  referencedBy:
//	  - target: {group: kagent.dev, version: v1alpha2, kind: Agent}
//	    name: {path: spec.declarative.modelConfig, default: default-model-config}
//	---
//	apiVersion: hotcert.dev/v1alpha1
//	kind: ReferenceRule
//	metadata: {name: kagent-agent}
//	spec:
//	  target: {group: kagent.dev, version: v1alpha2, kind: Agent}
//	  workloads: {ownerReferences: {}}
//
// A rule can also declare its target a workload kind the controller rolls,
// like a Deployment (spec.rollout): where its pod template is, optionally a
// restart field to set instead of stamping it, and a CEL readiness
// expression. Argo Rollouts:
//
//	spec:
//	  target: {group: argoproj.io, version: v1alpha1, kind: Rollout}
//	  rollout:
//	    podTemplate: spec.template
//	    restartAt: spec.restartAt
//	    ready: "has(self.status.phase) && self.status.phase != 'Progressing'"
//
// The CustomResourceDefinition, with its OpenAPI schema and CEL validation, is
// crd/hotcert.dev_referencerules.yaml (embedded as [CRDYAML]).
package v1alpha1

import (
	_ "embed"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is hotcert.dev/v1alpha1.
var GroupVersion = schema.GroupVersion{Group: "hotcert.dev", Version: "v1alpha1"}

// CRDYAML is the CustomResourceDefinition of ReferenceRule.
//
//go:embed crd/hotcert.dev_referencerules.yaml
var CRDYAML []byte

// AddToScheme registers ReferenceRule, TrustRotation and their lists.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &ReferenceRule{}, &ReferenceRuleList{}, &TrustRotation{}, &TrustRotationList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// ReferenceRule (cluster-scoped: it describes a kind, in every namespace)
// declares how objects of one kind take part in reference chains.
type ReferenceRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ReferenceRuleSpec   `json:"spec"`
	Status            ReferenceRuleStatus `json:"status,omitempty"`
}

// ReferenceRuleStatus is what the rollout controller made of the rule.
type ReferenceRuleStatus struct {
	// ObservedGeneration is the generation of the spec the conditions
	// describe.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: ConditionReady, and ConditionRolloutFieldKept for a rule
	// with a rollout.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ConditionReady is True when the rollout controller follows the rule as
// written (reason ReasonApplied), False when the latest rules could not be
// applied (reason ReasonNotApplied; the message says why, and the previous
// rules stay in use).
const (
	ConditionReady   = "Ready"
	ReasonApplied    = "Applied"
	ReasonNotApplied = "NotApplied"
)

// ConditionRolloutFieldKept, on a rule with a rollout, says whether the CRD
// of the declared kind keeps the field a rollout writes (rollout.restartAt,
// or the pod template's annotations): True (ReasonInSchema), False
// (ReasonPrunedBySchema: the schema prunes it, so every rollout of the kind
// would be refused; the message names the field), Unknown (ReasonSchemaUnknown:
// the CRD could not be read). A kind that is not a CRD has no such condition.
const (
	ConditionRolloutFieldKept = "RolloutFieldKept"
	ReasonInSchema            = "InSchema"
	ReasonPrunedBySchema      = "PrunedBySchema"
	ReasonSchemaUnknown       = "SchemaUnknown"
)

// ReferenceRuleSpec is what a ReferenceRule declares about its target kind.
type ReferenceRuleSpec struct {
	// Target is the kind the rule is about.
	Target GroupVersionKind `json:"target"`
	// SecretRefs are the fields of the target naming a Secret of its namespace,
	// with the key consumed.
	SecretRefs []DataRef `json:"secretRefs,omitempty"`
	// ConfigMapRefs are the fields of the target naming a ConfigMap of its
	// namespace, with the key consumed.
	ConfigMapRefs []DataRef `json:"configMapRefs,omitempty"`
	// ReferencedBy are the fields of other kinds naming an object of the
	// target kind: whatever the target consumes, they consume too.
	ReferencedBy []Referrer `json:"referencedBy,omitempty"`
	// Workloads says which workloads run an object of the target kind: they
	// consume whatever it consumes.
	Workloads *WorkloadRule `json:"workloads,omitempty"`
	// Rollout declares the target kind a workload kind the controller rolls,
	// like a Deployment: opted in with hotcert.dev/rollout-on-change, or
	// reached by another rule's workloads.
	Rollout *RolloutTarget `json:"rollout,omitempty"`
	// RolloutWindows, when set, are the only times the controller rolls the
	// workloads the rule's chain reaches (and, with Rollout, the objects of
	// its kind), unless the certificate their pods run reaches its expiry
	// margin first (see RolloutWindow). A workload's
	// hotcert.dev/rollout-windows annotation takes precedence; these take
	// precedence over the Namespace's.
	RolloutWindows []RolloutWindow `json:"rolloutWindows,omitempty"`
}

// RolloutTarget says how the controller rolls objects of a kind that is not
// a Deployment, StatefulSet or DaemonSet. Paths are dot-separated field
// names, without [] (each names one place).
type RolloutTarget struct {
	// PodTemplate is the path of the kind's pod template (a core/v1
	// PodTemplateSpec): what the workload consumes is read from its spec, and
	// the config hash is stamped into its annotations ("spec.template" for an
	// Argo Rollout, "spec.jobTemplate.spec.template" for a CronJob).
	PodTemplate string `json:"podTemplate"`
	// RestartAt, when set, is the path of a timestamp field that is set to
	// the time of the rollout (RFC 3339) instead of stamping the pod template
	// ("spec.restartAt" for an Argo Rollout).
	RestartAt string `json:"restartAt,omitempty"`
	// Ready is a CEL expression over the object (self) that is true when its
	// latest rollout is done, so that a change waits for the previous rollout
	// as it does for a Deployment. Without it the kind is always ready.
	Ready string `json:"ready,omitempty"`
}

// GroupVersionKind names a kind ("" group for the core API).
type GroupVersionKind struct {
	Group   string `json:"group,omitempty"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
}

// GVK returns g as a schema.GroupVersionKind.
func (g GroupVersionKind) GVK() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: g.Group, Version: g.Version, Kind: g.Kind}
}

// FieldRef reads a string from an object: the value at Path, or Default when
// the path is absent or empty. Path is dot-separated field names, each
// optionally followed by "[]" to take every element of a list
// ("spec.tools[].secretRef"), so one FieldRef can yield several values.
type FieldRef struct {
	Path    string `json:"path,omitempty"`
	Default string `json:"default,omitempty"`
}

// DataRef is one field naming a Secret or ConfigMap.
type DataRef struct {
	// Name is where the object's name is.
	Name FieldRef `json:"name"`
	// Key is where the consumed key is. Without it every key is consumed.
	// With a Path, it is read beside the name: from the same list element
	// when both paths go through the same list.
	Key *FieldRef `json:"key,omitempty"`
	// Optional tolerates a missing object or key (nothing is refused for it).
	Optional bool `json:"optional,omitempty"`
}

// NameFormat says how a referring field names an object.
type NameFormat string

// Name formats.
const (
	// FormatName is a name in the referrer's own namespace.
	FormatName NameFormat = "Name"
	// FormatNamespacedName is "namespace/name", or a name in the referrer's
	// namespace when there is no slash.
	FormatNamespacedName NameFormat = "NamespacedName"
)

// Referrer is a field of another kind naming an object of the target kind.
type Referrer struct {
	// Target is the referring kind.
	Target GroupVersionKind `json:"target"`
	// Name is where the referring object names the target.
	Name FieldRef `json:"name"`
	// Format is how Name is written; Name by default.
	Format NameFormat `json:"format,omitempty"`
}

// WorkloadRule says which workloads run an object of the target kind: exactly
// one of OwnerReferences, Selector or Name.
type WorkloadRule struct {
	// Kinds are the workload kinds considered: Deployment, StatefulSet,
	// DaemonSet (all three by default), or a kind a ReferenceRule declares a
	// rollout target (spec.rollout).
	Kinds []string `json:"kinds,omitempty"`
	// OwnerReferences: workloads whose controller owner reference is the object.
	OwnerReferences *OwnerReferences `json:"ownerReferences,omitempty"`
	// Selector: workloads of the object's namespace whose labels match; in the
	// values, "{name}" stands for the object's name.
	Selector map[string]string `json:"selector,omitempty"`
	// Name: the workload of the object's namespace with this name; "{name}"
	// stands for the object's name.
	Name string `json:"name,omitempty"`
}

// OwnerReferences selects workloads by their controller owner reference.
type OwnerReferences struct{}

// ReferenceRuleList is a list of ReferenceRules.
type ReferenceRuleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ReferenceRule `json:"items"`
}
