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
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/hotcert/hotcert/jwtkeys"
	"github.com/hotcert/hotcert/source/kube"
)

// Source reads a key set from one Secret. Create it with [NewSecret].
type Source struct {
	inner *kube.Source
	hmac  bool
}

var _ jwtkeys.Source = (*Source)(nil)

type options struct {
	signingKey, verifyKey string
	hmac                  bool
	resync                time.Duration
	logger                *slog.Logger
}

// Option configures a [Source].
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithSigningKeyKey sets the data key holding the PEM signing key (default
// "signing.key").
func WithSigningKeyKey(k string) Option { return optionFunc(func(o *options) { o.signingKey = k }) }

// WithVerificationKeysKey sets the data key holding verification-only PEM public keys
// (default "verify.pem"; the key may be absent from the Secret). "" ignores it.
func WithVerificationKeysKey(k string) Option {
	return optionFunc(func(o *options) { o.verifyKey = k })
}

// WithHMACSecretsKey reads an HS256 secret list from data key k (conventionally
// "hs256.keys") instead of a signing key.
func WithHMACSecretsKey(k string) Option {
	return optionFunc(func(o *options) { o.signingKey, o.hmac = k, true })
}

// WithResync sets the informer resync period (default kube.DefaultResync).
func WithResync(d time.Duration) Option { return optionFunc(func(o *options) { o.resync = d }) }

// WithLogger sets the logger for watch problems (default: discard).
func WithLogger(l *slog.Logger) Option { return optionFunc(func(o *options) { o.logger = l }) }

// NewSecret returns a source for the Secret namespace/name.
func NewSecret(client kubernetes.Interface, namespace, name string, opts ...Option) *Source {
	o := options{signingKey: jwtkeys.SigningKeyName, verifyKey: jwtkeys.VerificationKeysName, resync: kube.DefaultResync}
	for _, opt := range opts {
		opt.apply(&o)
	}
	// source/kube reads a required pair (certificate and key) and an optional bundle.
	// Both halves of the pair name the one key that signs; the optional bundle is the
	// verification list.
	inner := kube.NewSecret(client, namespace, name,
		kube.WithCertKey(o.signingKey), kube.WithPrivateKeyKey(o.signingKey), kube.WithCAKey(o.verifyKey),
		kube.WithResync(o.resync), kube.WithLogger(o.logger))
	return &Source{inner: inner, hmac: o.hmac}
}

// Read implements jwtkeys.Source: from the informer's cache while Watch runs, with a
// single GET otherwise.
func (s *Source) Read(ctx context.Context) (jwtkeys.Content, error) {
	c, err := s.inner.Read(ctx)
	if err != nil {
		return jwtkeys.Content{}, err
	}
	out := jwtkeys.Content{VerificationKeys: c.CA, Source: s.inner.String()}
	if s.hmac {
		out.HMACSecrets = c.Cert
	} else {
		out.SigningKey = c.Cert
	}
	return out, nil
}

// Watch implements jwtkeys.Source: an informer on exactly this Secret.
func (s *Source) Watch(ctx context.Context, changed func()) error { return s.inner.Watch(ctx, changed) }

// String names the Secret, e.g. "Secret ns/agent-token-keys".
func (s *Source) String() string { return s.inner.String() }
