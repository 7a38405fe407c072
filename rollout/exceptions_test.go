package rollout_test

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/internal/naming"
)

// TestExceptionsOfAnObject: the annotations as a Secret's and a ConfigMap's
// digest reads them.
func TestExceptionsOfAnObject(t *testing.T) {
	for _, tc := range []struct {
		ann     map[string]string
		object  bool
		keys    []string
		errPart string
	}{
		{ann: nil},
		{ann: map[string]string{rollout.AnnotationIgnore: "true"}, object: true},
		{ann: map[string]string{rollout.AnnotationIgnore: "false"}},
		{ann: map[string]string{rollout.AnnotationIgnore: "yes please"}, errPart: "is not true or false"},
		{ann: map[string]string{rollout.AnnotationIgnoreKeys: " b, a ,,a"}, keys: []string{"a", "b"}},
		{ann: map[string]string{rollout.AnnotationIgnoreKeys: "tls.crt"}, keys: []string{"tls.crt"}},
		// One bad name voids the whole value: nothing is ignored by mistake.
		{ann: map[string]string{rollout.AnnotationIgnoreKeys: "a,b/c"}, errPart: `"b/c" is not a key name`},
	} {
		meta := metav1.ObjectMeta{Namespace: "ns", Name: "o", Annotations: tc.ann}
		e := rollout.SecretObject(&corev1.Secret{ObjectMeta: meta}, testNow).Exceptions
		if c := rollout.ConfigMapObject(&corev1.ConfigMap{ObjectMeta: meta}, testNow).Exceptions; !reflect.DeepEqual(c, e) {
			t.Errorf("%v: a ConfigMap's %+v, a Secret's %+v", tc.ann, c, e)
		}
		if e.Object != tc.object || !reflect.DeepEqual(e.Keys, tc.keys) {
			t.Errorf("%v: got object=%v keys=%v", tc.ann, e.Object, e.Keys)
		}
		if (e.Err != nil) != (tc.errPart != "") || (e.Err != nil && !strings.Contains(e.Err.Error(), tc.errPart)) {
			t.Errorf("%v: error %v, want one containing %q", tc.ann, e.Err, tc.errPart)
		}
	}
}

// annotated builds a Lookup over one Secret s with data and annotations.
func annotated(data map[string]string, ann map[string]string) rollout.Lookup {
	return func(kind rollout.Kind, name string) (*rollout.Object, error) {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s", Annotations: ann}, Type: corev1.SecretTypeTLS, Data: map[string][]byte{}}
		for k, v := range data {
			s.Data[k] = []byte(v)
		}
		return rollout.SecretObject(s, testNow), nil
	}
}

func TestComputeLeavesIgnoredContentOut(t *testing.T) {
	leaf := hotcerttest.MustNewCA().MustIssue()
	refs := rollout.Refs{keysRef("s", "a", "b")}
	all := rollout.Refs{{Kind: rollout.KindSecret, Name: "s", All: true}}
	compute := func(refs rollout.Refs, data, ann map[string]string) *rollout.Config {
		t.Helper()
		cfg, err := rollout.Compute("ns", refs, annotated(data, ann))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	ignoreB := map[string]string{rollout.AnnotationIgnoreKeys: "b"}
	base := compute(refs, map[string]string{"a": "1", "b": "1"}, ignoreB)
	if got := compute(refs, map[string]string{"a": "1", "b": "2"}, ignoreB); got.Hash != base.Hash {
		t.Error("a change of an ignored key changed the hash")
	} else if got.Entries["Secret/s/b"] == base.Entries["Secret/s/b"] || !strings.HasPrefix(got.Entries["Secret/s/b"], naming.Ignored) {
		t.Errorf("the entry of an ignored key does not tell its change: %q then %q", base.Entries["Secret/s/b"], got.Entries["Secret/s/b"])
	}
	if got := compute(refs, map[string]string{"a": "2", "b": "1"}, ignoreB); got.Hash == base.Hash {
		t.Error("a change of a counted key left the hash alone")
	}
	// The entry of an ignored key is its entry without the annotation, marked.
	plain := compute(refs, map[string]string{"a": "1", "b": "1"}, nil)
	if base.Entries["Secret/s/b"] != naming.Ignored+plain.Entries["Secret/s/b"] || base.Entries["Secret/s/a"] != plain.Entries["Secret/s/a"] {
		t.Errorf("entries %v, without the annotation %v", base.Entries, plain.Entries)
	}

	// An ignored key comes and goes in a wholly consumed object without a
	// change of its key set.
	allBase := compute(all, map[string]string{"a": "1"}, ignoreB)
	if got := compute(all, map[string]string{"a": "1", "b": "x"}, ignoreB); got.Hash != allBase.Hash || got.Entries["Secret/s"] != allBase.Entries["Secret/s"] {
		t.Error("adding an ignored key changed the hash or the key set")
	}

	// An ignored object: nothing of it is hashed, and broken TLS is not refused.
	ignoreAll := map[string]string{rollout.AnnotationIgnore: "true"}
	tlsRefs := rollout.Refs{keysRef("s", "tls.crt", "tls.key")}
	broken := compute(tlsRefs, map[string]string{"tls.crt": "not a certificate", "tls.key": string(leaf.KeyPEM)}, ignoreAll)
	if len(broken.Invalid) != 0 {
		t.Errorf("an ignored object was refused: %v", broken.Invalid)
	}
	if good := compute(tlsRefs, map[string]string{"tls.crt": string(leaf.ChainPEM), "tls.key": string(leaf.KeyPEM)}, ignoreAll); good.Hash != broken.Hash {
		t.Error("an ignored object's content changed the hash")
	}
	if plainBroken := compute(tlsRefs, map[string]string{"tls.crt": "not a certificate", "tls.key": string(leaf.KeyPEM)}, nil); len(plainBroken.Invalid) == 0 {
		t.Error("without the annotation, broken TLS is not refused: the test proves nothing")
	}

	// A malformed annotation is reported and ignores nothing.
	bad := compute(refs, map[string]string{"a": "1", "b": "1"}, map[string]string{rollout.AnnotationIgnoreKeys: "b/"})
	if len(bad.Malformed) != 1 || bad.Hash != plain.Hash {
		t.Errorf("malformed: %v, hash equal to the plain one: %v", bad.Malformed, bad.Hash == plain.Hash)
	}
}
