package clusterview

import (
	"context"
	"maps"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/internal/naming"
)

// Store resolves references to rollout.Objects: the digest of each key of a
// referenced object and the result of its TLS check, never its data.
//
// It holds one entry per referenced object: its uid and resourceVersion as the
// watch last saw them, and the digest of that version once known. Where the
// digest comes from depends on the Mode:
//
//   - Referenced: the Watcher digests the object from the watch event
//     itself;
//   - Metadata: the watch brings the new resourceVersion only, and the
//     first reconcile that needs the new version reads it with one GET;
//   - Full: the manager's informer cache holds whole objects; they are
//     digested from it, once per version.
//
// An object the store does not know (not referenced when its last event came,
// or not listed yet) is read with a GET, and a missing object is always
// confirmed by the API server before a rollout is refused for it.
type Store struct {
	mode         Mode
	cache        client.Reader // Full: the manager's cache (see SetReaders)
	api          client.Reader // uncached reads
	clock        clock.PassiveClock
	reads        func(kind rollout.Kind)
	isReferenced func(kind rollout.Kind, namespace, name string) bool

	mu      sync.Mutex
	entries map[Key]*entry
	// trust holds the hotcert.dev/trusted-by annotation of every Secret the
	// watch has seen carry one, by namespace and name (referenced or not: a
	// declaration is tiny, and keeping them spares the trust guard a list of
	// the namespace's Secrets per rollout). trustKnown reports whether the
	// watch covers a namespace and has listed it (nil: no watch).
	trust      map[string]map[string]string
	trustKnown func(namespace string) bool
}

// Key names a Secret or ConfigMap.
type Key struct {
	Kind            rollout.Kind
	Namespace, Name string
}

type entry struct {
	uid types.UID
	rv  string
	obj *rollout.Object // the digest of version rv, or nil until read
}

// SetReaders gives the store the manager's cache and uncached reader, which
// exist only once the manager is built (the store is built with the
// controller, before it). It must be called before the manager starts.
func (s *Store) SetReaders(cache, api client.Reader) {
	s.cache, s.api = cache, api
}

// Len is the number of objects whose digest the store holds.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, e := range s.entries {
		if e.obj != nil {
			n++
		}
	}
	return n
}

// Lookup returns the rollout.Lookup for namespace (and, through
// naming.Foreign, for objects of other namespaces).
func (s *Store) Lookup(ctx context.Context, namespace string) rollout.Lookup {
	return func(kind rollout.Kind, name string) (*rollout.Object, error) {
		ns, n := naming.Split(namespace, name)
		return s.get(ctx, Key{Kind: kind, Namespace: ns, Name: n})
	}
}

func (s *Store) get(ctx context.Context, k Key) (*rollout.Object, error) {
	key := client.ObjectKey{Namespace: k.Namespace, Name: k.Name}
	if s.mode == Full {
		obj := NewObject(k.Kind)
		err := s.cache.Get(ctx, key, obj)
		if err == nil {
			s.observed(k, obj.GetUID(), obj.GetResourceVersion(), obj)
			if o := s.Current(k); o != nil {
				return o, nil
			}
		} else if !apierrors.IsNotFound(err) {
			return nil, err
		}
	} else if o := s.Current(k); o != nil {
		return o, nil
	}
	// Unknown, or its new version not read yet.
	s.mu.Lock()
	var seenRV string
	if e := s.entries[k]; e != nil {
		seenRV = e.rv
	}
	s.mu.Unlock()
	obj := NewObject(k.Kind)
	s.reads(k.Kind)
	if err := s.api.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			s.forget(k)
			return nil, nil
		}
		return nil, err
	}
	o := s.digest(obj)
	s.mu.Lock()
	defer s.mu.Unlock()
	// Keep what the watch recorded meanwhile, if it moved on during the GET:
	// that version will be read by the reconcile its event triggers.
	if e := s.entries[k]; e == nil || e.rv == seenRV {
		s.entries[k] = &entry{uid: obj.GetUID(), rv: obj.GetResourceVersion(), obj: o}
	}
	return o, nil
}

// Current returns the digest of the version the store last saw, if known.
func (s *Store) Current(k Key) *rollout.Object {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.entries[k]; e != nil && e.obj != nil && e.obj.ResourceVersion == e.rv && e.obj.UID == e.uid {
		return e.obj
	}
	return nil
}

// observed records a version of a referenced object seen by a watch or a
// cache, digesting it if raw holds its data, and reports whether the version
// is new to the store.
func (s *Store) observed(k Key, uid types.UID, rv string, raw any) bool {
	s.mu.Lock()
	if e := s.entries[k]; e != nil && e.uid == uid && e.rv == rv {
		s.mu.Unlock()
		return false
	}
	s.mu.Unlock()
	var o *rollout.Object
	switch raw.(type) {
	case *corev1.Secret, *corev1.ConfigMap:
		o = s.digest(raw.(client.Object))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entries[k] = &entry{uid: uid, rv: rv, obj: o}
	return true
}

// forget drops an object, reporting whether the store knew it.
func (s *Store) forget(k Key) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.entries[k]
	delete(s.entries, k)
	return ok
}

// Keys lists the known objects of kind in namespace ("" for all).
func (s *Store) Keys(kind rollout.Kind, namespace string) []Key {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Key
	for k := range s.entries {
		if k.Kind == kind && (namespace == "" || k.Namespace == namespace) {
			out = append(out, k)
		}
	}
	return out
}

// setTrust records the trusted-by annotation of Secret ns/name ("" drops it).
func (s *Store) setTrust(ns, name, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if value == "" {
		if m := s.trust[ns]; m != nil {
			delete(m, name)
			if len(m) == 0 {
				delete(s.trust, ns)
			}
		}
		return
	}
	if s.trust == nil {
		s.trust = map[string]map[string]string{}
	}
	if s.trust[ns] == nil {
		s.trust[ns] = map[string]string{}
	}
	s.trust[ns][name] = value
}

// dropTrust forgets the declarations of namespace ns ("" for all).
func (s *Store) dropTrust(ns string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ns == "" {
		s.trust = nil
		return
	}
	delete(s.trust, ns)
}

// TrustedBy returns the trusted-by annotations of the Secrets of namespace
// ns, by Secret name, and whether the watch knows them (if not, the caller
// lists the namespace's Secrets).
func (s *Store) TrustedBy(ns string) (map[string]string, bool) {
	if s.trustKnown == nil || !s.trustKnown(ns) {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.trust[ns]), true
}

func (s *Store) digest(obj client.Object) *rollout.Object {
	now := s.clock.Now()
	switch o := obj.(type) {
	case *corev1.Secret:
		return rollout.SecretObject(o, now)
	case *corev1.ConfigMap:
		return rollout.ConfigMapObject(o, now)
	}
	return nil
}

// NewObject returns an empty Secret (kind rollout.KindSecret) or ConfigMap.
func NewObject(kind rollout.Kind) client.Object {
	if kind == rollout.KindSecret {
		return &corev1.Secret{}
	}
	return &corev1.ConfigMap{}
}
