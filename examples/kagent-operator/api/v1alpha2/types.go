// Package v1alpha2 holds the two kagent-shaped custom resources of the example
// operator: a ModelConfig names the Secrets an agent consumes (an API key and a
// CA certificate), an Agent names its ModelConfig. They mirror the fields of
// kagent's own CRDs that matter for rollouts, nothing more.
package v1alpha2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of the example's resources.
var GroupVersion = schema.GroupVersion{Group: "kagent.example.dev", Version: "v1alpha2"}

// AddToScheme registers the example's types.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &ModelConfig{}, &ModelConfigList{}, &Agent{}, &AgentList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// DefaultModelConfig is the ModelConfig an Agent uses when it names none.
const DefaultModelConfig = "default-model-config"

// Default keys of the Secrets a ModelConfig names.
const (
	DefaultAPIKeySecretKey = "api-key"
	DefaultCACertSecretKey = "ca.crt"
)

// ModelConfig says how agents reach a model: which Secret holds the API key,
// and which Secret holds the CA certificate the model's endpoint is verified
// against.
type ModelConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ModelConfigSpec `json:"spec,omitempty"`
}

// ModelConfigSpec is the desired state of a ModelConfig.
type ModelConfigSpec struct {
	Model string `json:"model,omitempty"`
	// APIKeySecret names a Secret of the ModelConfig's namespace.
	APIKeySecret string `json:"apiKeySecret,omitempty"`
	// APIKeySecretKey is the key of APIKeySecret holding the key
	// (DefaultAPIKeySecretKey when empty).
	APIKeySecretKey string     `json:"apiKeySecretKey,omitempty"`
	TLS             *TLSConfig `json:"tls,omitempty"`
}

// TLSConfig is the TLS configuration of a ModelConfig.
type TLSConfig struct {
	// CACertSecretRef names a Secret of the ModelConfig's namespace.
	CACertSecretRef string `json:"caCertSecretRef,omitempty"`
	// CACertSecretKey is the key of CACertSecretRef holding the CA bundle
	// (DefaultCACertSecretKey when empty).
	CACertSecretKey string `json:"caCertSecretKey,omitempty"`
}

// APIKey returns the Secret and key holding the API key, or "" when none.
func (s *ModelConfigSpec) APIKey() (secret, key string) {
	if s.APIKeySecret == "" {
		return "", ""
	}
	key = s.APIKeySecretKey
	if key == "" {
		key = DefaultAPIKeySecretKey
	}
	return s.APIKeySecret, key
}

// CACert returns the Secret and key holding the CA bundle, or "" when none.
func (s *ModelConfigSpec) CACert() (secret, key string) {
	if s.TLS == nil || s.TLS.CACertSecretRef == "" {
		return "", ""
	}
	key = s.TLS.CACertSecretKey
	if key == "" {
		key = DefaultCACertSecretKey
	}
	return s.TLS.CACertSecretRef, key
}

// ModelConfigList is a list of ModelConfigs.
type ModelConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ModelConfig `json:"items"`
}

// Agent is an agent: the operator runs it as a Deployment it owns.
type Agent struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              AgentSpec `json:"spec,omitempty"`
}

// AgentSpec is the desired state of an Agent.
type AgentSpec struct {
	Description string                `json:"description,omitempty"`
	Declarative *DeclarativeAgentSpec `json:"declarative,omitempty"`
}

// DeclarativeAgentSpec is the declarative part of an Agent.
type DeclarativeAgentSpec struct {
	// ModelConfig names a ModelConfig of the Agent's namespace
	// (DefaultModelConfig when empty).
	ModelConfig   string `json:"modelConfig,omitempty"`
	SystemMessage string `json:"systemMessage,omitempty"`
}

// ModelConfigName returns the name of the Agent's ModelConfig.
func (a *Agent) ModelConfigName() string {
	if a.Spec.Declarative != nil && a.Spec.Declarative.ModelConfig != "" {
		return a.Spec.Declarative.ModelConfig
	}
	return DefaultModelConfig
}

// AgentList is a list of Agents.
type AgentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Agent `json:"items"`
}
