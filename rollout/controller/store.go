package controller

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
// results, computed once per version of a referenced object; the data itself
// is never kept here.
//
// Where the data comes from depends on the mode (see SecretCache):
//
//   - CacheReferenced: the informer cache holds the data of referenced objects
//     (a transform drops everyone else's); a change arrives with its data and
//     is digested from the cache. An object that became referenced after it
//     was cached (its data dropped) is read once with a GET.
//   - CacheMetadata: the cache holds metadata only; when its resourceVersion
//     is not the digested one, the object is read with one GET.
//   - CacheFull: the cache holds everything.
//
// An object absent from a cache, possibly lagging, is confirmed with a GET
// before it is reported missing (a reason to refuse a rollout).
type store struct {
	mode  SecretCache
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
	var cached client.Object = newDataObject(k.kind)
	if s.mode == CacheMetadata {
		cached = metadataObject(k.kind)
	}
	err := s.cache.Get(ctx, key, cached)
	switch {
	case err == nil:
		if o := s.cached(k, cached.GetUID(), cached.GetResourceVersion()); o != nil {
			return o, nil
		}
		if s.mode != CacheMetadata && cached.GetAnnotations()[dataDropped] == "" {
			return s.remember(k, s.digest(cached)), nil
		}
	case !apierrors.IsNotFound(err):
		return nil, err
	}
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
