package kube

import (
	"context"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hotcert/hotcert"
)

// Source reads TLS material from one Secret or ConfigMap. Create it with
// [NewSecret] or [NewConfigMap].
type Source struct {
	keys *Keys // certificate, key, CA bundle, in this order
}

var (
	_ hotcert.Source       = (*Source)(nil)
	_ hotcert.SourceLogger = (*Source)(nil)
)

// NewSecret returns a source for the Secret namespace/name: identity from tls.crt and
// tls.key, trust from ca.crt when present and not empty (key names configurable).
func NewSecret(client kubernetes.Interface, namespace, name string, opts ...Option) *Source {
	c := defaults()
	c.certKey, c.keyKey, c.caKey = corev1.TLSCertKey, corev1.TLSPrivateKeyKey, "ca.crt"
	for _, o := range opts {
		o.apply(&c)
	}
	keys := []Key{{Name: c.certKey}, {Name: c.keyKey}, {Name: c.caKey, Optional: true}}
	return &Source{keys: newKeysOf(client, secretKind, namespace, name, keys, c)}
}

// NewConfigMap returns a source for the CA bundle in the ConfigMap namespace/name,
// under the key ca.crt unless [WithCAKey] says otherwise. Both data and binaryData are
// read; the key is required.
func NewConfigMap(client kubernetes.Interface, namespace, name string, opts ...Option) *Source {
	c := defaults()
	c.caKey = "ca.crt"
	for _, o := range opts {
		o.apply(&c)
	}
	keys := []Key{{}, {}, {Name: c.caKey}}
	return &Source{keys: newKeysOf(client, configMapKind, namespace, name, keys, c)}
}

// String names the object, e.g. "Secret ns/api-tls".
func (s *Source) String() string { return s.keys.String() }

// Read implements [hotcert.Source]: from the informer's cache while Watch runs and
// the informer follows the object, with a GET otherwise (see [Keys]).
func (s *Source) Read(ctx context.Context) (hotcert.Content, error) {
	ins, err := s.keys.Read(ctx)
	if err != nil {
		return hotcert.Content{}, err
	}
	return hotcert.Content{Cert: ins[0], Key: ins[1], CA: ins[2], Source: s.String()}, nil
}

// Watch implements [hotcert.Source]: an informer on exactly this one object (see
// [Keys.Watch]).
func (s *Source) Watch(ctx context.Context, changed func()) error { return s.keys.Watch(ctx, changed) }

// SetDefaultLogger implements hotcert.SourceLogger: a Reloader hands the source its
// logger, which says when the watch is lost and when it is back, unless
// [WithLogger] gave one.
func (s *Source) SetDefaultLogger(l *slog.Logger) { s.keys.SetDefaultLogger(l) }
