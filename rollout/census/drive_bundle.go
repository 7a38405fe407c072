package census

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
	core "github.com/hotcert/hotcert/rollout/internal/census"
)

// The objects a driven rotation writes its bundle into (spec.drive.bundle):
// a ConfigMap or Secret key, a ClusterTrustBundle it publishes, or a
// trust-manager Bundle whose sources it edits. Every write reads the object
// from the API server, parses what it holds whole (a bundle with a cut or
// unparsable block is never rewritten), writes only when the edit changes
// it, and writes with the resourceVersion it read (a concurrent change
// fails the write: the next census decides again).

// bundleName is how status and Events name the drive's bundle object, as
// the census names the spec.trust entry it is.
func bundleName(b v1alpha1.DriveBundle) string {
	switch {
	case b.Secret != nil:
		return core.Object{Kind: core.KindSecret, Namespace: b.Secret.Namespace, Name: b.Secret.Name, Key: b.Secret.Key}.String()
	case b.ConfigMap != nil:
		return core.Object{Kind: core.KindConfigMap, Namespace: b.ConfigMap.Namespace, Name: b.ConfigMap.Name, Key: b.ConfigMap.Key}.String()
	case b.Bundle != nil:
		return "Bundle " + b.Bundle.Name
	case b.ClusterTrustBundle != nil:
		return "ClusterTrustBundle " + b.ClusterTrustBundle.Name
	}
	return "no bundle"
}

// bundleIndex is the index in spec.trust of the entry through which the
// census proves what the drive's bundle object carries (-1: none).
func bundleIndex(b v1alpha1.DriveBundle, trust []v1alpha1.TrustObject) int {
	for i, t := range trust {
		switch {
		case b.ConfigMap != nil && t.ConfigMap != nil && *t.ConfigMap == *b.ConfigMap,
			b.Secret != nil && t.Secret != nil && *t.Secret == *b.Secret,
			b.Bundle != nil && t.Bundle != nil && t.Bundle.Name == b.Bundle.Name:
			return i
		case b.ClusterTrustBundle != nil && t.ClusterTrustBundle != nil:
			c := t.ClusterTrustBundle
			if c.Name != "" && c.Name == b.ClusterTrustBundle.Name || c.SignerName != "" && c.SignerName == b.ClusterTrustBundle.SignerName {
				return i
			}
		}
	}
	return -1
}

// addCA writes ca into the bundle beside what it holds (the union).
func (c *Census) addCA(ctx context.Context, b v1alpha1.DriveBundle, ca, other side) error {
	if b.Bundle != nil {
		return c.editSources(ctx, *b.Bundle, ca, true)
	}
	return c.editBundle(ctx, b, func(certs []*x509.Certificate, missing bool) []*x509.Certificate {
		if missing { // a ClusterTrustBundle is published holding both
			certs = slices.Clone(other.certs)
		}
		for _, x := range ca.certs {
			if !slices.ContainsFunc(certs, func(y *x509.Certificate) bool { return y.Equal(x) }) {
				certs = append(certs, x)
			}
		}
		return certs
	})
}

// removeCA removes ca's certificates from the bundle.
func (c *Census) removeCA(ctx context.Context, b v1alpha1.DriveBundle, ca side) error {
	if b.Bundle != nil {
		return c.editSources(ctx, *b.Bundle, ca, false)
	}
	return c.editBundle(ctx, b, func(certs []*x509.Certificate, _ bool) []*x509.Certificate {
		return slices.DeleteFunc(certs, ca.holds)
	})
}

func (s side) holds(x *x509.Certificate) bool { return s.SHA256[hotcert.FingerprintOf(x).String()] }

// editBundle rewrites a ConfigMap or Secret key, or a ClusterTrustBundle,
// as edit says (missing: the ClusterTrustBundle does not exist yet). A
// bundle is never left empty.
func (c *Census) editBundle(ctx context.Context, b v1alpha1.DriveBundle, edit func(certs []*x509.Certificate, missing bool) []*x509.Certificate) error {
	name := bundleName(b)
	var obj client.Object
	var data []byte
	missing := false
	switch {
	case b.Secret != nil:
		s := &corev1.Secret{}
		if err := c.api.Get(ctx, client.ObjectKey{Namespace: b.Secret.Namespace, Name: b.Secret.Name}, s); err != nil {
			return fmt.Errorf("census: drive: reading %s: %w", name, err)
		}
		obj, data = s, s.Data[b.Secret.Key]
	case b.ConfigMap != nil:
		cm := &corev1.ConfigMap{}
		if err := c.api.Get(ctx, client.ObjectKey{Namespace: b.ConfigMap.Namespace, Name: b.ConfigMap.Name}, cm); err != nil {
			return fmt.Errorf("census: drive: reading %s: %w", name, err)
		}
		obj, data = cm, []byte(cm.Data[b.ConfigMap.Key])
	case b.ClusterTrustBundle != nil:
		ctb := &certificatesv1.ClusterTrustBundle{}
		err := c.api.Get(ctx, client.ObjectKey{Name: b.ClusterTrustBundle.Name}, ctb)
		switch {
		case apierrors.IsNotFound(err):
			missing = true
			ctb = &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: b.ClusterTrustBundle.Name},
				Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: b.ClusterTrustBundle.SignerName}}
		case err != nil:
			return fmt.Errorf("census: drive: reading %s: %w", name, err)
		case ctb.Spec.SignerName != b.ClusterTrustBundle.SignerName:
			return fmt.Errorf("census: drive: %s is not rewritten: its signerName is %q, spec.drive.bundle says %q", name, ctb.Spec.SignerName, b.ClusterTrustBundle.SignerName)
		}
		obj, data = ctb, []byte(ctb.Spec.TrustBundle)
	default:
		return errors.New("census: drive: spec.drive.bundle names no object")
	}
	var certs []*x509.Certificate
	if len(data) > 0 {
		var err error
		if certs, err = hotcert.ParseCertificates(hotcert.Input{Name: name, Data: data}); err != nil {
			return fmt.Errorf("census: drive: %s is not rewritten: %w", name, err)
		}
	}
	before := slices.Clone(certs)
	after := edit(certs, missing)
	if !missing && slices.EqualFunc(before, after, func(a, b *x509.Certificate) bool { return a.Equal(b) }) {
		return nil
	}
	if len(after) == 0 {
		return fmt.Errorf("census: drive: %s is not rewritten: it would hold no certificate", name)
	}
	out := hotcert.EncodeCertificates(after...)
	switch o := obj.(type) {
	case *corev1.Secret:
		if o.Data == nil {
			o.Data = map[string][]byte{}
		}
		o.Data[b.Secret.Key] = out
	case *corev1.ConfigMap:
		if o.Data == nil {
			o.Data = map[string]string{}
		}
		o.Data[b.ConfigMap.Key] = string(out)
	case *certificatesv1.ClusterTrustBundle:
		o.Spec.TrustBundle = string(out)
		if missing {
			if err := c.client.Create(ctx, o, client.FieldOwner(FieldManager)); err != nil {
				return fmt.Errorf("census: drive: publishing %s: %w", name, err)
			}
			return nil
		}
	}
	if err := c.client.Update(ctx, obj, client.FieldOwner(FieldManager)); err != nil {
		return fmt.Errorf("census: drive: writing %s: %w", name, err)
	}
	return nil
}

// editSources edits a trust-manager Bundle's spec.sources: add puts ca in
// an inLine source of its own (unless an inLine source holds it already);
// remove takes ca's certificates out of every inLine source (dropping one
// left empty) and drops the configMap and secret sources, named, whose key
// in the trust namespace holds ca's certificates and nothing else. Other
// sources (useDefaultCAs, label selectors, includeAllKeys, a key holding
// more) are left as they are: if they carry ca, the census sees it in the
// Bundle's targets.
func (c *Census) editSources(ctx context.Context, ref v1alpha1.DriveTrustManagerBundle, ca side, add bool) error {
	name := "Bundle " + ref.Name
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(bundleGVK)
	if err := c.api.Get(ctx, client.ObjectKey{Name: ref.Name}, u); err != nil {
		return fmt.Errorf("census: drive: reading %s: %w", name, err)
	}
	sources, _, err := unstructured.NestedSlice(u.Object, "spec", "sources")
	if err != nil {
		return fmt.Errorf("census: drive: %s: spec.sources: %w", name, err)
	}
	changed := false
	var out []any
	for i, raw := range sources {
		src, _ := raw.(map[string]any)
		inLine, isInLine := src["inLine"].(string)
		switch {
		case isInLine:
			certs, err := hotcert.ParseCertificates(hotcert.Input{Name: fmt.Sprintf("%s source %d (inLine)", name, i), Data: []byte(inLine)})
			if err != nil {
				return fmt.Errorf("census: drive: %s is not rewritten: %w", name, err)
			}
			if add {
				if !slices.ContainsFunc(ca.certs, func(x *x509.Certificate) bool { return !slices.ContainsFunc(certs, x.Equal) }) {
					return nil // an inLine source holds it already
				}
				break
			}
			kept := slices.DeleteFunc(slices.Clone(certs), ca.holds)
			if len(kept) == len(certs) {
				break
			}
			changed = true
			if len(kept) > 0 {
				out = append(out, map[string]any{"inLine": string(hotcert.EncodeCertificates(kept...))})
			}
			continue
		case !add:
			only, err := c.sourceHoldsOnly(ctx, ref, src, ca)
			if err != nil {
				return fmt.Errorf("census: drive: %s source %d: %w", name, i, err)
			}
			if only {
				changed = true
				continue
			}
		}
		out = append(out, raw)
	}
	if add {
		out = append(out, map[string]any{"inLine": string(hotcert.EncodeCertificates(ca.certs...))})
		changed = true
	}
	if !changed {
		return nil
	}
	if len(out) == 0 {
		return fmt.Errorf("census: drive: %s is not rewritten: it would have no source", name)
	}
	if err := unstructured.SetNestedSlice(u.Object, out, "spec", "sources"); err != nil {
		return fmt.Errorf("census: drive: %s: %w", name, err)
	}
	if err := c.client.Update(ctx, u, client.FieldOwner(FieldManager)); err != nil {
		return fmt.Errorf("census: drive: writing %s: %w", name, err)
	}
	return nil
}

// sourceHoldsOnly reports whether a Bundle source naming one key of one
// ConfigMap or Secret in the trust namespace holds ca's certificates and
// nothing else. A source of any other form is not the rotation's to drop.
func (c *Census) sourceHoldsOnly(ctx context.Context, ref v1alpha1.DriveTrustManagerBundle, src map[string]any, ca side) (bool, error) {
	ns := ref.TrustNamespace
	if ns == "" {
		ns = v1alpha1.DefaultTrustNamespace
	}
	var data []byte
	var what string
	for _, kind := range []string{"configMap", "secret"} {
		sel, ok := src[kind].(map[string]any)
		if !ok {
			continue
		}
		objName, _ := sel["name"].(string)
		key, _ := sel["key"].(string)
		if all, _ := sel["includeAllKeys"].(bool); objName == "" || key == "" || all {
			return false, nil
		}
		what = fmt.Sprintf("%s %s/%s key %s", kind, ns, objName, key)
		ok2 := client.ObjectKey{Namespace: ns, Name: objName}
		var err error
		if kind == "configMap" {
			cm := &corev1.ConfigMap{}
			if err = c.api.Get(ctx, ok2, cm); err == nil {
				data = []byte(cm.Data[key])
			}
		} else {
			s := &corev1.Secret{}
			if err = c.api.Get(ctx, ok2, s); err == nil {
				data = s.Data[key]
			}
		}
		if err != nil {
			return false, fmt.Errorf("reading %s: %w", what, err)
		}
	}
	if what == "" || len(data) == 0 {
		return false, nil
	}
	certs, err := hotcert.ParseCertificates(hotcert.Input{Name: what, Data: data})
	if err != nil {
		return false, err
	}
	return !slices.ContainsFunc(certs, func(x *x509.Certificate) bool { return !ca.holds(x) }), nil
}
