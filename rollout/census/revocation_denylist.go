package census

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/revocation"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
	core "github.com/hotcert/hotcert/rollout/internal/census"
)

// Default keys of a deny-list object, as the docs' revocation.FromInputs
// example and `hotcert server --deny-list --crl-file` on a mounted object
// read them.
const (
	DefaultDenyListKey = "deny.list"
	DefaultCRLKey      = "ca.crl"
)

// denyList is one deny-list object, read and validated.
type denyList struct {
	object string
	list   *revocation.List // nil when err is set
	err    string
}

// readDenyLists reads each deny-list object (one GET each, never cached) and
// validates what it holds as every hotcert process does
// (revocation.Validate): its version is the version a consumer reading the
// same keys reports, and a list a consumer would refuse is an error here. CRL
// signatures are checked against trust, the rotation's CAs.
func readDenyLists(ctx context.Context, r client.Reader, objs []v1alpha1.DenyListObject, trust *hotcert.Material, now time.Time) []denyList {
	out := make([]denyList, len(objs))
	for i, o := range objs {
		kind, keys := string(core.KindConfigMap), o.ConfigMap
		if o.Secret != nil {
			kind, keys = string(core.KindSecret), o.Secret
		}
		d := &out[i]
		d.object = fmt.Sprintf("%s %s/%s", kind, keys.Namespace, keys.Name)
		data, err := readKeys(ctx, r, kind, keys.Namespace, keys.Name)
		if err != nil {
			d.err = err.Error()
			continue
		}
		listKey, crlKey := keys.DenyListKey, keys.CRLKey
		if listKey == "" && crlKey == "" {
			listKey, crlKey = DefaultDenyListKey, DefaultCRLKey
		}
		c := revocation.Content{Source: d.object, DenyList: input(d.object, listKey, data), CRLs: input(d.object, crlKey, data)}
		if d.list, err = revocation.Validate(c, trust, now); err != nil {
			d.err = "its list would be refused: " + err.Error()
		}
	}
	return out
}

// input is key of data as a hotcert process's source reads it: absent when
// the key is not read, absent or empty (as source/kube's optional keys are).
func input(object, key string, data map[string][]byte) hotcert.Input {
	if key == "" || len(data[key]) == 0 {
		return hotcert.Input{}
	}
	return hotcert.Input{Name: object + " key " + key, Data: data[key]}
}

// readKeys reads the data of a ConfigMap (data and binaryData) or Secret.
func readKeys(ctx context.Context, r client.Reader, kind, ns, name string) (map[string][]byte, error) {
	k := client.ObjectKey{Namespace: ns, Name: name}
	if kind == string(core.KindSecret) {
		s := &corev1.Secret{}
		if err := r.Get(ctx, k, s); err != nil {
			return nil, readError(kind, ns, name, err)
		}
		return s.Data, nil
	}
	cm := &corev1.ConfigMap{}
	if err := r.Get(ctx, k, cm); err != nil {
		return nil, readError(kind, ns, name, err)
	}
	data := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for key, v := range cm.BinaryData {
		data[key] = v
	}
	for key, v := range cm.Data {
		data[key] = []byte(v)
	}
	return data, nil
}

// trustOf is the trust CRLs are verified against: the rotation's CAs (nil
// when it names them by fingerprint only).
func trustOf(cas []side) *hotcert.Material {
	var bundle []byte
	for _, s := range cas {
		bundle = append(bundle, hotcert.EncodeCertificates(s.certs...)...)
	}
	if len(bundle) == 0 {
		return nil
	}
	m, err := hotcert.Validate(hotcert.Content{CA: hotcert.Input{Name: "the rotation's CAs", Data: bundle}})
	if err != nil {
		return nil
	}
	return m
}

// revocationTriggers are the deny-list objects of spec: a change wakes the
// rotation's census.
func revocationTriggers(spec *v1alpha1.TrustRotationSpec) []trigger {
	if spec.Revocation == nil {
		return nil
	}
	var out []trigger
	for _, o := range spec.Revocation.DenyLists {
		if o.ConfigMap != nil {
			out = append(out, trigger{"configmaps", o.ConfigMap.Name})
		}
		if o.Secret != nil {
			out = append(out, trigger{"secrets", o.Secret.Name})
		}
	}
	return out
}
