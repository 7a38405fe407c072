package rollout

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"slices"
	"time"

	"github.com/hotcert/hotcert/rollout/internal/naming"
)

// hashVersion starts every hashed stream, so that a future encoding can never
// produce the same value for different content.
const hashVersion = "hotcert.dev/config-hash/v1"

// Problem is a reason not to roll: a required object or key is missing, or a
// consumed key holds unusable TLS content.
type Problem struct {
	Kind Kind
	Name string
	// Key is empty when the problem is the whole object.
	Key    string
	Reason Reason
	// Detail says what is wrong; it never holds secret data.
	Detail string
	// NotBefore is when content that is not valid yet (ReasonNotYetValid)
	// becomes valid.
	NotBefore time.Time
}

// Reason classifies a [Problem]; its values are stable, for metric labels.
type Reason string

// Problem reasons.
const (
	ReasonMissingObject Reason = "missing_object"
	ReasonMissingKey    Reason = "missing_key"
	ReasonInvalidTLS    Reason = "invalid_tls"
	// ReasonNotYetValid: correct TLS content whose certificates are not all
	// valid yet; it is rolled out at its NotBefore (see [NotYetValidError]).
	ReasonNotYetValid Reason = "not_yet_valid"
	// ReasonOutOfScope: a chain of custom resources leads to an object in a
	// namespace the controller does not watch.
	ReasonOutOfScope Reason = "out_of_scope"
	// ReasonCrossNamespace: a chain leads to an object in another namespace
	// and the hashes are not keyed.
	ReasonCrossNamespace Reason = "cross_namespace"
	// ReasonInvalidAnnotation: an exception annotation of a consumed object
	// is malformed (it excepts nothing).
	ReasonInvalidAnnotation Reason = "invalid_annotation"
)

func (p Problem) String() string {
	switch {
	case p.Detail != "":
		// The detail names the object and key already.
		return p.Detail
	case p.Reason == ReasonMissingObject:
		return fmt.Sprintf("%s %s not found", p.Kind, naming.Display(p.Name))
	case p.Reason == ReasonMissingKey:
		return fmt.Sprintf("%s %s has no key %s", p.Kind, naming.Display(p.Name), p.Key)
	default:
		return fmt.Sprintf("%s %s: %s", p.Kind, naming.Display(p.Name), p.Reason)
	}
}

// Config is the consumed content of a workload at one moment.
type Config struct {
	// Hash is the hex SHA-256 of every consumed key (see the package doc): the
	// value of the pod-template stamp.
	Hash string
	// Entries maps each consumed object ("Secret/name") and key
	// ("Secret/name/key") to a short salted digest of its value, "+" for an
	// object whose keys are not all consumed, or "-" for an absent optional
	// object or key; a value that an exception annotation leaves out of the
	// hash (see [Exceptions]) is marked with a leading "!". The entry "#key"
	// identifies the hash key (see [WithHashKey]): when it differs from the
	// recorded one, digests cannot be compared. It is what
	// [AnnotationAppliedKeys] records.
	Entries map[string]string
	// Missing lists required objects and keys that do not exist.
	Missing []Problem
	// Invalid lists consumed keys whose TLS content is unusable.
	Invalid []Problem
	// NotYetValid lists consumed keys whose TLS content is correct but not
	// valid yet, each with its NotBefore (when the Objects were digested).
	NotYetValid []Problem
	// Malformed lists consumed objects whose exception annotations cannot be
	// read (see [Exceptions]); they except nothing.
	Malformed []Problem
	// Leaf is the validity of the consumed leaf certificate that expires
	// first (zero when no consumed key holds one; ignored keys do not count).
	Leaf Validity
}

// Lookup returns the current version of the object kind/name of the workload's
// namespace, or nil (and no error) when it does not exist.
type Lookup func(kind Kind, name string) (*Object, error)

// HashOption configures [Compute].
type HashOption interface{ applyHash(*hashConfig) }

type hashConfig struct{ key []byte }

type hashOptionFunc func(*hashConfig)

func (f hashOptionFunc) applyHash(c *hashConfig) { f(c) }

// WithHashKey makes the hash and the recorded digests HMAC-SHA256 under key, so
// that someone who can read workloads but not Secrets cannot test guesses of a
// low-entropy Secret value against them. The key must stay the same across
// controller restarts, or every workload's recorded digests stop matching (which
// rolls nothing, but loses the per-key change messages until the next rollout).
func WithHashKey(key []byte) HashOption {
	return hashOptionFunc(func(c *hashConfig) { c.key = slices.Clone(key) })
}

// Compute resolves refs in namespace through lookup and hashes the consumed keys.
// Problems (missing objects or keys, invalid TLS content) are returned in the
// Config, not as errors; an error means lookup failed.
func Compute(namespace string, refs Refs, lookup Lookup, opts ...HashOption) (*Config, error) {
	h := newHasher(namespace, opts)
	for _, r := range refs {
		obj, err := lookup(r.Kind, r.Name)
		if err != nil {
			return nil, err
		}
		if obj == nil {
			h.absentObject(r)
			continue
		}
		h.object(r, obj)
	}
	h.out.Hash = hex.EncodeToString(h.full.Sum(nil))
	return h.out, nil
}

// hasher is one run of [Compute]: the running hash of every counted entry and
// the Config it fills.
type hasher struct {
	key       []byte // the hash key (see [WithHashKey]), nil for none
	namespace string // salts the recorded digests
	full      hash.Hash
	out       *Config
}

func newHasher(namespace string, opts []HashOption) *hasher {
	var cfg hashConfig
	for _, o := range opts {
		o.applyHash(&cfg)
	}
	h := &hasher{key: cfg.key, namespace: namespace, out: &Config{Entries: map[string]string{naming.KeyIDEntry: keyID(cfg.key)}}}
	h.full = h.newHash()
	writeLP(h.full, []byte(hashVersion))
	return h
}

// newHash returns an HMAC-SHA256 under the hash key, or a SHA-256 without one.
func (h *hasher) newHash() hash.Hash {
	if h.key != nil {
		return hmac.New(sha256.New, h.key)
	}
	return sha256.New()
}

// entry records one (name, value) pair in Entries and, unless it is ignored,
// in the stream.
func (h *hasher) entry(name string, value []byte, ignored bool) {
	mark := ""
	if ignored {
		mark = naming.Ignored
	} else {
		writeLP(h.full, []byte(name))
		writeLP(h.full, value)
	}
	h.out.Entries[name] = mark + h.recorded(name, value)
}

// recorded is what Entries keeps of value: "-" or "+" for the markers, else
// a short digest salted with the namespace and name.
func (h *hasher) recorded(name string, value []byte) string {
	switch {
	case len(value) == 1 && value[0] == absent:
		return "-"
	case len(value) == 1 && value[0] == present:
		return "+"
	}
	d := h.newHash()
	writeLP(d, []byte("hotcert.dev/applied-keys/v1"))
	writeLP(d, []byte(h.namespace))
	writeLP(d, []byte(name))
	writeLP(d, value)
	return hex.EncodeToString(d.Sum(nil)[:8])
}

// absentObject records an object that does not exist, and each key it names,
// as absent; it is missing unless optional.
func (h *hasher) absentObject(r Ref) {
	if !r.Optional {
		h.out.Missing = append(h.out.Missing, Problem{Kind: r.Kind, Name: r.Name, Reason: ReasonMissingObject})
	}
	h.entry(entryName(r), []byte{absent}, false)
	for _, k := range r.Keys {
		h.entry(entryName(r)+"/"+k.Key, []byte{absent}, false)
	}
}

// object records an existing object: its malformed exceptions, its missing
// keys, the object (its key set when wholly consumed) and each consumed key.
func (h *hasher) object(r Ref, obj *Object) {
	exc := obj.Exceptions
	if exc.Err != nil {
		h.out.Malformed = append(h.out.Malformed, Problem{Kind: r.Kind, Name: r.Name, Reason: ReasonInvalidAnnotation,
			Detail: fmt.Sprintf("%s %s: %v", r.Kind, naming.Display(r.Name), exc.Err)})
	}
	h.missingKeys(r, obj)
	if r.All {
		h.entry(entryName(r), keySet(obj), exc.Object)
	} else {
		h.entry(entryName(r), []byte{present}, exc.Object)
	}
	for _, k := range consumedKeys(r, obj) {
		h.consumedKey(r, obj, k)
	}
}

// missingKeys lists the required keys r names that obj does not have.
func (h *hasher) missingKeys(r Ref, obj *Object) {
	for _, k := range r.Keys {
		if _, ok := obj.Keys[k.Key]; !ok && !k.Optional {
			h.out.Missing = append(h.out.Missing, Problem{Kind: r.Kind, Name: r.Name, Key: k.Key, Reason: ReasonMissingKey})
		}
	}
}

// consumedKeys are the keys r names, in its order, or, when r consumes all of
// obj, those and obj's keys, sorted.
func consumedKeys(r Ref, obj *Object) []string {
	keys := make([]string, 0, len(r.Keys))
	for _, k := range r.Keys {
		keys = append(keys, k.Key)
	}
	if !r.All {
		return keys
	}
	for k := range obj.Keys {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// keySet is the value of a wholly consumed object: the SHA-256 of its key
// names. Ignored keys come and go without changing the set.
func keySet(obj *Object) []byte {
	exc := obj.Exceptions
	names := slices.DeleteFunc(sortedKeys(obj.Keys), func(k string) bool { return !exc.Object && exc.Ignores(k) })
	ks := sha256.New()
	for _, k := range names {
		writeLP(ks, []byte(k))
	}
	return ks.Sum(nil)
}

// consumedKey records key k of obj (absent when obj has none) and, unless it
// is ignored, its TLS problem.
func (h *hasher) consumedKey(r Ref, obj *Object, k string) {
	ignored := obj.Exceptions.Ignores(k)
	d, ok := obj.Keys[k]
	if !ok {
		h.entry(entryName(r)+"/"+k, []byte{absent}, ignored)
		return
	}
	h.entry(entryName(r)+"/"+k, d[:], ignored)
	if err := obj.Problems[k]; err != nil && !ignored {
		h.tlsProblem(r, k, err)
	}
	if v, ok := obj.Leaves[k]; ok && !ignored && (h.out.Leaf.IsZero() || v.NotAfter.Before(h.out.Leaf.NotAfter)) {
		h.out.Leaf = v
	}
}

// tlsProblem lists the TLS problem err of key k as not yet valid or invalid.
func (h *hasher) tlsProblem(r Ref, k string, err error) {
	var early *NotYetValidError
	if errors.As(err, &early) {
		h.out.NotYetValid = append(h.out.NotYetValid, Problem{Kind: r.Kind, Name: r.Name, Key: k, Reason: ReasonNotYetValid, Detail: err.Error(), NotBefore: early.NotBefore})
		return
	}
	h.out.Invalid = append(h.out.Invalid, Problem{Kind: r.Kind, Name: r.Name, Key: k, Reason: ReasonInvalidTLS, Detail: err.Error()})
}

// entryName names r's object in Entries ("Secret/name"); its keys follow it
// after a "/".
func entryName(r Ref) string { return string(r.Kind) + "/" + r.Name }

func keyID(key []byte) string {
	if key == nil {
		return "none"
	}
	h := sha256.New()
	writeLP(h, []byte("hotcert.dev/hash-key-id/v1"))
	writeLP(h, key)
	return hex.EncodeToString(h.Sum(nil)[:4])
}

// Markers for absent and present values; a digest is 32 bytes, so the length
// prefix keeps them distinct from any digest.
const (
	absent  = 0
	present = 1
)

// writeLP writes b prefixed by its length, so that no concatenation of fields
// can be read two ways.
func writeLP(h hash.Hash, b []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(b)))
	h.Write(n[:])
	h.Write(b)
}
