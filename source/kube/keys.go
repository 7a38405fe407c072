package kube

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
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

// A Key is one data key of the object a [Keys] reader reads.
type Key struct {
	// Name is the data key. An empty Name leaves its input absent.
	Name string
	// Optional makes a key that is absent or empty read as an absent input instead
	// of an error (a TLS Secret's ca.crt, a list of extra keys).
	Optional bool
}

// Keys reads chosen data keys of one Secret or ConfigMap, whatever they hold, and
// watches that one object: the mechanism under [Source] and under other content kept
// in Secrets (JWT keys, package jwtkeys/jwtkube). Create it with [NewSecretKeys] or
// [NewConfigMapKeys]. It implements hotcert.SourceLogger, so that a reloader over a
// source built on it hands it its logger.
//
// Watch runs an informer restricted by a metadata.name field selector to the object,
// so nothing else is cached and get/list/watch on that one name is all the RBAC it
// needs. Read answers from the informer's cache while the informer lists and watches
// successfully. When it cannot — access revoked, the API server unreachable — Read
// goes to the API server with a GET instead of serving a cache that no longer
// follows the object: a poll then either sees the object's current data or fails
// with the reason, which the reloader logs and counts once and shows in its Status,
// as it does for a file it cannot read. Before Watch has synced, Read GETs too.
//
// A GET the API server refuses (401, 403) or does not answer, as a restarting API
// server does for a moment, is not reported at once: Read returns the last answer
// instead, until the failure has lasted the refusal grace ([WithRefusalGrace],
// default [DefaultRefusalGrace]), measured from the first such refusal (or from
// the first unanswered read); then it returns the failure, and asks for a read.
type Keys struct {
	client          kubernetes.Interface
	kind            kind
	namespace, name string
	keys            []Key
	informer        *follower
	grace           *grace[runtime.Object]
}

// NewSecretKeys returns a reader of keys of the Secret namespace/name.
func NewSecretKeys(client kubernetes.Interface, namespace, name string, keys []Key, opts ...Option) *Keys {
	return newKeys(client, secretKind, namespace, name, keys, opts)
}

// NewConfigMapKeys returns a reader of keys of the ConfigMap namespace/name; a key
// may be in its data or its binaryData.
func NewConfigMapKeys(client kubernetes.Interface, namespace, name string, keys []Key, opts ...Option) *Keys {
	return newKeys(client, configMapKind, namespace, name, keys, opts)
}

func newKeys(client kubernetes.Interface, k kind, namespace, name string, keys []Key, opts []Option) *Keys {
	c := defaults()
	for _, o := range opts {
		o.apply(&c)
	}
	return newKeysOf(client, k, namespace, name, keys, c)
}

func newKeysOf(client kubernetes.Interface, k kind, namespace, name string, keys []Key, c config) *Keys {
	ks := &Keys{client: client, kind: k, namespace: namespace, name: name, keys: slices.Clone(keys)}
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	ks.informer = &follower{what: ks.String(), resync: c.resync, logger: c.logger, example: &corev1.Secret{},
		list: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return client.CoreV1().Secrets(namespace).List(ctx, o)
		},
		watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return client.CoreV1().Secrets(namespace).Watch(ctx, o)
		},
	}
	if k == configMapKind {
		ks.informer.example = &corev1.ConfigMap{}
		ks.informer.list = func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return client.CoreV1().ConfigMaps(namespace).List(ctx, o)
		}
		ks.informer.watch = func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return client.CoreV1().ConfigMaps(namespace).Watch(ctx, o)
		}
	}
	ks.grace = newGrace[runtime.Object](c, ks.informer.poke)
	return ks
}

// String names the object, e.g. "Secret ns/api-tls".
func (k *Keys) String() string { return fmt.Sprintf("%s %s/%s", k.kind, k.namespace, k.name) }

// Read returns one input per key, in order, named like "Secret ns/api-tls key
// tls.crt": absent for an empty Name and for an absent or empty optional key.
// Errors are *hotcert.Error values naming the object or the key.
func (k *Keys) Read(ctx context.Context) ([]hotcert.Input, error) {
	obj, err := k.current(ctx)
	if err != nil {
		return nil, err
	}
	data := dataOf(obj)
	ins := make([]hotcert.Input, len(k.keys))
	for i, key := range k.keys {
		if key.Name == "" {
			continue
		}
		v, ok := data[key.Name]
		name := fmt.Sprintf("%s key %s", k, key.Name)
		switch {
		case key.Optional && len(v) == 0:
			continue // absent or empty: none (older cert-manager writes an empty ca.crt)
		case !ok:
			return nil, &hotcert.Error{Input: name, Reason: hotcert.ReasonMissing, Detail: "does not exist"}
		}
		ins[i] = hotcert.Input{Name: name, Data: v}
	}
	return ins, nil
}

// current returns the object from the cache while the informer follows it, and GETs
// it otherwise; a GET the API server refuses or does not answer returns the last
// answer for the refusal grace.
func (k *Keys) current(ctx context.Context) (runtime.Object, error) {
	obj, err := k.fetch(ctx)
	if ctx.Err() != nil {
		return obj, err // shutting down: no answer, nor a failure to hold
	}
	return k.grace.read(obj, err)
}

// fetch is current without the grace.
func (k *Keys) fetch(ctx context.Context) (runtime.Object, error) {
	if st := k.informer.cached(); st != nil {
		obj, exists, err := st.GetByKey(k.namespace + "/" + k.name)
		if err != nil {
			return nil, &hotcert.Error{Input: k.String(), Reason: hotcert.ReasonRead, Detail: "cannot be read from the cache", Err: err}
		}
		if !exists {
			return nil, k.notFound()
		}
		return obj.(runtime.Object), nil
	}
	var (
		obj runtime.Object
		err error
	)
	if k.kind == secretKind {
		obj, err = k.client.CoreV1().Secrets(k.namespace).Get(ctx, k.name, metav1.GetOptions{})
	} else {
		obj, err = k.client.CoreV1().ConfigMaps(k.namespace).Get(ctx, k.name, metav1.GetOptions{})
	}
	if st := k.informer.catchingUp(); st != nil && holds(st, k.namespace+"/"+k.name, obj, err) {
		k.informer.caughtUp()
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, k.notFound()
	case err != nil:
		return nil, readError(k.String(), k.informer.lost(), err)
	}
	return obj, nil
}

// holds reports whether the cache st holds under key what a GET answered (got, or
// not found): the same resourceVersion, or no object.
func holds(st cache.Store, key string, got runtime.Object, err error) bool {
	cached, exists, cerr := st.GetByKey(key)
	switch {
	case cerr != nil:
		return false
	case apierrors.IsNotFound(err):
		return !exists
	case err != nil || !exists:
		return false
	}
	return sameVersion(cached, got)
}

// sameVersion reports whether a and b are objects of one resourceVersion.
func sameVersion(a, b any) bool {
	ma, err := meta.Accessor(a)
	if err != nil {
		return false
	}
	mb, err := meta.Accessor(b)
	return err == nil && ma.GetResourceVersion() == mb.GetResourceVersion()
}

// readError is the refusal of a read from the API server: worded for a source
// whose watch was lost when lost.
func readError(what string, lost bool, err error) error {
	detail := "cannot be read"
	if lost {
		detail = "can no longer be watched nor read"
	}
	return &hotcert.Error{Input: what, Reason: hotcert.ReasonRead, Detail: detail, Err: err}
}

func (k *Keys) notFound() error {
	return &hotcert.Error{Input: k.String(), Reason: hotcert.ReasonMissing, Detail: "does not exist"}
}

// dataOf returns the object's data; a ConfigMap's string data and binary data are merged.
func dataOf(obj runtime.Object) map[string][]byte {
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

// SetDefaultLogger implements hotcert.SourceLogger: the watch's lines go to l
// unless [WithLogger] gave a logger.
func (k *Keys) SetDefaultLogger(l *slog.Logger) { k.informer.setDefaultLogger(l) }

// Watch blocks until ctx is done, calling changed on every add, update and delete
// of the object. It runs an informer on exactly this one object (field selector
// metadata.name), which re-lists and re-watches by itself when the watch breaks.
// Every list and watch call the informer makes tells Read whether the cache still
// follows the object: a failing one makes Read go to the API server, a succeeding
// one lets it use the cache again.
func (k *Keys) Watch(ctx context.Context, changed func()) error { return k.informer.run(ctx, changed) }
