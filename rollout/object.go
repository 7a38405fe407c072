package rollout

import (
	"cmp"
	"crypto/sha256"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Digest is the SHA-256 of one value.
type Digest [32]byte

// Object is what the controller keeps of one version of a Secret or ConfigMap: a
// digest of each value and the result of the TLS check, never the data itself.
// It is immutable once built.
type Object struct {
	Kind            Kind
	Namespace, Name string
	UID             types.UID
	ResourceVersion string
	// Type is the Secret's type ("" for a ConfigMap).
	Type corev1.SecretType
	// Keys holds the SHA-256 of each value (Secret data; ConfigMap data and
	// binaryData, whose keys never overlap).
	Keys map[string]Digest
	// Problems holds, per key, why its TLS content is unusable (see [CheckTLS]).
	Problems map[string]error
	// Exceptions are the keys (or the whole object) its annotations exclude
	// from rolling.
	Exceptions Exceptions
	// Leaves holds, per key holding a leaf certificate (or a chain starting
	// with one), its validity (see [Validity]); nil when there is none.
	Leaves map[string]Validity
}

// SecretObject digests a Secret, checking its TLS content at now.
func SecretObject(s *corev1.Secret, now time.Time) *Object {
	o := &Object{
		Kind: KindSecret, Namespace: s.Namespace, Name: s.Name, UID: s.UID,
		ResourceVersion: s.ResourceVersion, Type: s.Type,
		Keys: make(map[string]Digest, len(s.Data)), Exceptions: parseExceptions(s.Annotations),
	}
	for k, v := range s.Data {
		o.Keys[k] = sha256.Sum256(v)
	}
	o.Problems = CheckTLS(s.Type, "Secret "+s.Namespace+"/"+s.Name, s.Data, now)
	o.Leaves = leafValidities(s.Data)
	return o
}

// ConfigMapObject digests a ConfigMap, checking its TLS content at now.
func ConfigMapObject(c *corev1.ConfigMap, now time.Time) *Object {
	o := &Object{
		Kind: KindConfigMap, Namespace: c.Namespace, Name: c.Name, UID: c.UID,
		ResourceVersion: c.ResourceVersion,
		Keys:            make(map[string]Digest, len(c.Data)+len(c.BinaryData)),
		Exceptions:      parseExceptions(c.Annotations),
	}
	data := make(map[string][]byte, len(c.Data)+len(c.BinaryData))
	for k, v := range c.Data {
		data[k] = []byte(v)
	}
	maps.Copy(data, c.BinaryData)
	for k, v := range data {
		o.Keys[k] = sha256.Sum256(v)
	}
	o.Problems = CheckTLS("", "ConfigMap "+c.Namespace+"/"+c.Name, data, now)
	o.Leaves = leafValidities(data)
	return o
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.SortedFunc(maps.Keys(m), cmp.Compare[string])
}
