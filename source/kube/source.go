package kube

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/hotcert/hotcert"
)

type kind int

const (
	secretKind kind = iota
	configMapKind
)

func (k kind) String() string {
	if k == secretKind {
		return "Secret"
	}
	return "ConfigMap"
}

// Source reads one Secret or ConfigMap. Create it with [NewSecret] or [NewConfigMap].
type Source struct {
	client          kubernetes.Interface
	kind            kind
	namespace, name string
	certKey, keyKey string
	caKey           string
	resync          time.Duration
	logger          *slog.Logger

	store atomic.Pointer[cache.Store] // the informer's cache while Watch runs and has synced
}

var _ hotcert.Source = (*Source)(nil)

// NewSecret returns a source for the Secret namespace/name: identity from tls.crt and
// tls.key, trust from ca.crt when present (key names configurable).
func NewSecret(client kubernetes.Interface, namespace, name string, opts ...Option) *Source {
	return newSource(client, secretKind, namespace, name, opts)
}

// NewConfigMap returns a source for the CA bundle in the ConfigMap namespace/name,
// under the key ca.crt unless [WithCAKey] says otherwise. Both data and binaryData are
// read.
func NewConfigMap(client kubernetes.Interface, namespace, name string, opts ...Option) *Source {
	return newSource(client, configMapKind, namespace, name, opts)
}

func newSource(client kubernetes.Interface, k kind, namespace, name string, opts []Option) *Source {
	s := &Source{
		client: client, kind: k, namespace: namespace, name: name,
		certKey: corev1.TLSCertKey, keyKey: corev1.TLSPrivateKeyKey, caKey: "ca.crt",
		resync: DefaultResync, logger: discard(),
	}
	if k == configMapKind {
		s.certKey, s.keyKey = "", ""
	}
	for _, o := range opts {
		o.apply(s)
	}
	return s
}

// String names the object, e.g. "Secret ns/api-tls".
func (s *Source) String() string { return fmt.Sprintf("%s %s/%s", s.kind, s.namespace, s.name) }

// Read implements [hotcert.Source]: from the informer's cache while Watch runs, with
// a single GET otherwise.
func (s *Source) Read(ctx context.Context) (hotcert.Content, error) {
	obj, err := s.current(ctx)
	if err != nil {
		return hotcert.Content{}, err
	}
	data := s.data(obj)
	c := hotcert.Content{Source: s.String()}
	if s.certKey != "" {
		if c.Cert, err = s.input(data, s.certKey, true); err != nil {
			return hotcert.Content{}, err
		}
		if c.Key, err = s.input(data, s.keyKey, true); err != nil {
			return hotcert.Content{}, err
		}
	}
	if s.caKey != "" {
		if c.CA, err = s.input(data, s.caKey, s.kind == configMapKind); err != nil {
			return hotcert.Content{}, err
		}
	}
	return c, nil
}

func (s *Source) input(data map[string][]byte, key string, required bool) (hotcert.Input, error) {
	name := fmt.Sprintf("%s key %s", s, key)
	v, ok := data[key]
	if !ok {
		if required {
			return hotcert.Input{}, &hotcert.Error{Input: name, Reason: hotcert.ReasonMissing, Detail: "does not exist"}
		}
		return hotcert.Input{}, nil
	}
	return hotcert.Input{Name: name, Data: v}, nil
}

// current returns the object from the cache, or GETs it when no informer has synced.
func (s *Source) current(ctx context.Context) (runtime.Object, error) {
	if st := s.store.Load(); st != nil {
		obj, exists, err := (*st).GetByKey(s.namespace + "/" + s.name)
		if err != nil {
			return nil, &hotcert.Error{Input: s.String(), Reason: hotcert.ReasonRead, Detail: "cannot be read from the cache", Err: err}
		}
		if !exists {
			return nil, s.notFound()
		}
		return obj.(runtime.Object), nil
	}
	var (
		obj runtime.Object
		err error
	)
	if s.kind == secretKind {
		obj, err = s.client.CoreV1().Secrets(s.namespace).Get(ctx, s.name, metav1.GetOptions{})
	} else {
		obj, err = s.client.CoreV1().ConfigMaps(s.namespace).Get(ctx, s.name, metav1.GetOptions{})
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, s.notFound()
	case err != nil:
		return nil, &hotcert.Error{Input: s.String(), Reason: hotcert.ReasonRead, Detail: "cannot be read", Err: err}
	}
	return obj, nil
}

func (s *Source) notFound() error {
	return &hotcert.Error{Input: s.String(), Reason: hotcert.ReasonMissing, Detail: "does not exist"}
}

// data returns the object's data; a ConfigMap's string data and binary data are merged.
func (s *Source) data(obj runtime.Object) map[string][]byte {
	switch o := obj.(type) {
	case *corev1.Secret:
		return o.Data
	case *corev1.ConfigMap:
		d := make(map[string][]byte, len(o.Data)+len(o.BinaryData))
		for k, v := range o.BinaryData {
			d[k] = v
		}
		for k, v := range o.Data {
			d[k] = []byte(v)
		}
		return d
	}
	return nil
}

// Watch implements [hotcert.Source]. It runs an informer on exactly this one object
// (field selector metadata.name) and calls changed on every add, update and delete.
// The informer re-lists and re-watches by itself when the watch breaks.
func (s *Source) Watch(ctx context.Context, changed func()) error {
	selector := fields.OneTermEqualSelector("metadata.name", s.name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			if s.kind == secretKind {
				return s.client.CoreV1().Secrets(s.namespace).List(ctx, o)
			}
			return s.client.CoreV1().ConfigMaps(s.namespace).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			if s.kind == secretKind {
				return s.client.CoreV1().Secrets(s.namespace).Watch(ctx, o)
			}
			return s.client.CoreV1().ConfigMaps(s.namespace).Watch(ctx, o)
		},
	}
	var example runtime.Object = &corev1.Secret{}
	if s.kind == configMapKind {
		example = &corev1.ConfigMap{}
	}
	inf := cache.NewSharedIndexInformer(lw, example, s.resync, cache.Indexers{})
	if err := inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		s.logger.Warn("watch of TLS object interrupted; the informer re-lists", "object", s.String(), "error", err.Error())
	}); err != nil {
		return fmt.Errorf("kube: %s: %w", s, err)
	}
	notify := func(any) { changed() }
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(_, _ any) { changed() },
		DeleteFunc: notify,
	}); err != nil {
		return fmt.Errorf("kube: %s: %w", s, err)
	}
	var wg sync.WaitGroup
	defer wg.Wait() // the informer's goroutines end before Watch returns
	wg.Go(func() { inf.RunWithContext(ctx) })
	if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		st := inf.GetStore()
		s.store.Store(&st)
		changed() // the cache may know more than the GET that loaded the first content
	}
	<-ctx.Done()
	s.store.Store(nil)
	return nil
}

// cachedObjects returns how many objects the informer holds (for tests: exactly one).
func (s *Source) cachedObjects() int {
	if st := s.store.Load(); st != nil {
		return len((*st).ListKeys())
	}
	return 0
}
