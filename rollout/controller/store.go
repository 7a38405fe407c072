package controller

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hotcert/hotcert/rollout"
)

// maxDigested bounds the digests kept in memory. Only referenced objects are
// digested, so real clusters stay far below it; past it, entries are dropped
// and read again when needed.
const maxDigested = 50_000

// store resolves references to rollout.Objects: per-key digests and TLS check
// results, never data.
//
// Memory. Secrets and ConfigMaps are watched as metadata only (name, namespace,
// uid, resourceVersion; see cacheOptions), so a Helm release Secret costs a few
// hundred bytes, not its data. When a workload is reconciled, each object it
// references is looked up in that metadata cache: if its resourceVersion is the
// one already digested, the digest is reused; otherwise the object is read with
// one GET (uncached) and digested, and its data is dropped. The data of an
// object no opted-in workload references is never read at all.
//
// With Options.CacheSecretData the whole objects are cached instead (the design
// of Reloader, wave and kagent), for comparison.
type store struct {
	full  bool          // objects are cached whole
	cache client.Reader // the manager's cache
	api   client.Reader // uncached reads
	clock clock.PassiveClock
	reads func(kind rollout.Kind)

	mu   sync.Mutex
	objs map[objKey]*rollout.Object
}

type objKey struct {
	kind            rollout.Kind
	namespace, name string
}

func (s *store) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.objs)
}

// lookup returns the rollout.Lookup for namespace.
func (s *store) lookup(ctx context.Context, namespace string) rollout.Lookup {
	return func(kind rollout.Kind, name string) (*rollout.Object, error) {
		return s.get(ctx, objKey{kind, namespace, name})
	}
}

func (s *store) get(ctx context.Context, k objKey) (*rollout.Object, error) {
	key := client.ObjectKey{Namespace: k.namespace, Name: k.name}
	if s.full {
		obj := newDataObject(k.kind)
		err := s.cache.Get(ctx, key, obj)
		if err == nil {
			if o := s.cached(k, obj.GetUID(), obj.GetResourceVersion()); o != nil {
				return o, nil
			}
			return s.remember(k, s.digest(obj)), nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, err
		}
	} else {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(string(k.kind)))
		err := s.cache.Get(ctx, key, m)
		if err == nil {
			if o := s.cached(k, m.UID, m.ResourceVersion); o != nil {
				return o, nil
			}
		} else if !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	// Not digested at this version, or not in the cache yet: read it. A missing
	// object is a reason to refuse a rollout, so absence in a possibly lagging
	// cache is confirmed by the API server.
	obj := newDataObject(k.kind)
	s.reads(k.kind)
	if err := s.api.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			s.forget(k)
			return nil, nil
		}
		return nil, err
	}
	return s.remember(k, s.digest(obj)), nil
}

func (s *store) cached(k objKey, uid types.UID, rv string) *rollout.Object {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o := s.objs[k]; o != nil && o.ResourceVersion == rv && o.UID == uid {
		return o
	}
	return nil
}

func (s *store) remember(k objKey, o *rollout.Object) *rollout.Object {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.objs) >= maxDigested {
		for old := range s.objs { // drop an arbitrary tenth
			delete(s.objs, old)
			if len(s.objs) < maxDigested*9/10 {
				break
			}
		}
	}
	s.objs[k] = o
	return o
}

func (s *store) forget(k objKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.objs, k)
}

// observe drops a digest that an event shows to be stale.
func (s *store) observe(kind rollout.Kind, obj client.Object) {
	k := objKey{kind, obj.GetNamespace(), obj.GetName()}
	s.mu.Lock()
	defer s.mu.Unlock()
	if o := s.objs[k]; o != nil && o.ResourceVersion != obj.GetResourceVersion() {
		delete(s.objs, k)
	}
}

func (s *store) digest(obj client.Object) *rollout.Object {
	now := s.clock.Now()
	switch o := obj.(type) {
	case *corev1.Secret:
		return rollout.SecretObject(o, now)
	case *corev1.ConfigMap:
		return rollout.ConfigMapObject(o, now)
	}
	return nil
}

func newDataObject(kind rollout.Kind) client.Object {
	if kind == rollout.KindSecret {
		return &corev1.Secret{}
	}
	return &corev1.ConfigMap{}
}
