// Package jwtkube is a jwtkeys.Source that reads a key set from one Kubernetes
// Secret, with the informer of package source/kube: restricted by a metadata.name
// field selector to that one Secret, so the process caches nothing else and needs
// only get/list/watch on that one name:
//
//	rules:
//	- apiGroups: [""]
//	  resources: ["secrets"]
//	  resourceNames: ["agent-token-keys"]
//	  verbs: ["get", "list", "watch"]
//
// The Secret's keys follow the file layout of package jwtfile: signing.key (PEM
// private key) and optional verify.pem (PEM public keys), or hs256.keys (HS256 secret
// list, first signs) with [WithHMACSecretsKey]. Informer resyncs and updates that do
// not touch these keys cost one hash comparison: no reload, no log line, no metric.
// A deleted Secret keeps the last good keys (reported once); a recreated one is
// loaded.
package jwtkube

import (
	"context"
	"log/slog"

	"k8s.io/client-go/kubernetes"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/jwtkeys"
	"github.com/hotcert/hotcert/source/kube"
)

// Source reads a key set from one Secret. Create it with [NewSecret].
type Source struct {
	keys *kube.Keys // the signing key or HMAC secrets, then the verification keys
	hmac bool
}

var (
	_ jwtkeys.Source       = (*Source)(nil)
	_ hotcert.SourceLogger = (*Source)(nil)
)

type options struct {
	signingKey, verifyKey string
	hmac                  bool
	kube                  []kube.Option
}

// Option configures a [Source].
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithSigningKeyKey sets the data key holding the PEM signing key (default
// "signing.key").
func WithSigningKeyKey(k string) Option { return optionFunc(func(o *options) { o.signingKey = k }) }

// WithVerificationKeysKey sets the data key holding verification-only PEM public keys
// (default "verify.pem"; the key may be absent from the Secret, or empty). "" ignores
// it.
func WithVerificationKeysKey(k string) Option {
	return optionFunc(func(o *options) { o.verifyKey = k })
}

// WithHMACSecretsKey reads an HS256 secret list from data key k (conventionally
// "hs256.keys") instead of a signing key.
func WithHMACSecretsKey(k string) Option {
	return optionFunc(func(o *options) { o.signingKey, o.hmac = k, true })
}

// WithWatch passes options to the Secret's informer (package source/kube's
// kube.WithResync, kube.WithLogger and kube.WithRefusalGrace). Without
// kube.WithLogger, the informer logs through the KeySet's logger.
func WithWatch(opts ...kube.Option) Option {
	return optionFunc(func(o *options) { o.kube = append(o.kube, opts...) })
}

// NewSecret returns a source for the Secret namespace/name. Reading and watching are
// package source/kube's [kube.Keys], the mechanism under the TLS Secret source: a
// watch that can no longer follow the Secret makes reads go to the API server, and
// a failing read is reported by the KeySet once, as a bad key is.
func NewSecret(client kubernetes.Interface, namespace, name string, opts ...Option) *Source {
	o := options{signingKey: jwtkeys.SigningKeyName, verifyKey: jwtkeys.VerificationKeysName}
	for _, opt := range opts {
		opt.apply(&o)
	}
	keys := kube.NewSecretKeys(client, namespace, name,
		[]kube.Key{{Name: o.signingKey}, {Name: o.verifyKey, Optional: true}}, o.kube...)
	return &Source{keys: keys, hmac: o.hmac}
}

// Read implements jwtkeys.Source: from the informer's cache while Watch runs and
// follows the Secret, with a GET otherwise.
func (s *Source) Read(ctx context.Context) (jwtkeys.Content, error) {
	ins, err := s.keys.Read(ctx)
	if err != nil {
		return jwtkeys.Content{}, err
	}
	out := jwtkeys.Content{VerificationKeys: ins[1], Source: s.keys.String()}
	if s.hmac {
		out.HMACSecrets = ins[0]
	} else {
		out.SigningKey = ins[0]
	}
	return out, nil
}

// Watch implements jwtkeys.Source: an informer on exactly this Secret.
func (s *Source) Watch(ctx context.Context, changed func()) error { return s.keys.Watch(ctx, changed) }

// SetDefaultLogger implements hotcert.SourceLogger: a KeySet hands the source its
// logger, which says when the watch is lost and when it is back, unless
// kube.WithLogger gave one.
func (s *Source) SetDefaultLogger(l *slog.Logger) { s.keys.SetDefaultLogger(l) }

// String names the Secret, e.g. "Secret ns/agent-token-keys".
func (s *Source) String() string { return s.keys.String() }
