package census

import (
	"context"
	"crypto/x509"
	"fmt"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
	core "github.com/hotcert/hotcert/rollout/internal/census"
	"github.com/hotcert/hotcert/rollout/internal/census/evidence"
)

// bundleGVK is trust-manager's Bundle.
var bundleGVK = schema.GroupVersionKind{Group: "trust.cert-manager.io", Version: "v1alpha1", Kind: "Bundle"}

// side is one CA of the rotation: what the census matches (fingerprints,
// subjects) and, when the spec gives them, its certificates.
type side struct {
	core.CA
	certs []*x509.Certificate
}

// loadCA reads one side of the rotation.
func loadCA(ctx context.Context, r client.Reader, c v1alpha1.CA, which string) (side, error) {
	s := side{CA: core.CA{Name: c.Name, SHA256: map[string]bool{}, Subjects: map[string]bool{}}}
	var data []byte
	switch {
	case len(c.SHA256) > 0:
		for _, fp := range c.SHA256 {
			s.SHA256[strings.ToLower(fp)] = true
		}
		if s.Name == "" {
			s.Name = c.SHA256[0][:12]
		}
		return s, nil
	case c.PEM != "":
		data = []byte(c.PEM)
	case c.From != nil:
		var err error
		if data, err = readKey(ctx, r, c.From.Kind, c.From.Namespace, c.From.Name, c.From.Key); err != nil {
			return side{}, fmt.Errorf("%s CA: %w", which, err)
		}
	}
	certs, err := hotcert.ParseCertificates(hotcert.Input{Name: which + " CA", Data: data})
	if err != nil {
		return side{}, err
	}
	s.certs = certs
	for _, ca := range certs {
		s.SHA256[hotcert.FingerprintOf(ca).String()] = true
		s.Subjects[ca.Subject.String()] = true
	}
	if s.Name == "" {
		s.Name = certs[0].Subject.CommonName
		if s.Name == "" {
			s.Name = certs[0].Subject.String()
		}
	}
	return s, nil
}

// readKey reads one key of a ConfigMap or Secret from the API server.
func readKey(ctx context.Context, r client.Reader, kind, ns, name, key string) ([]byte, error) {
	k := client.ObjectKey{Namespace: ns, Name: name}
	var data []byte
	var found bool
	switch kind {
	case string(core.KindSecret):
		s := &corev1.Secret{}
		if err := r.Get(ctx, k, s); err != nil {
			return nil, readError(kind, ns, name, err)
		}
		data, found = s.Data[key]
	default:
		cm := &corev1.ConfigMap{}
		if err := r.Get(ctx, k, cm); err != nil {
			return nil, readError(kind, ns, name, err)
		}
		var v string
		if v, found = cm.Data[key]; found {
			data = []byte(v)
		} else {
			data, found = cm.BinaryData[key]
		}
	}
	if !found {
		return nil, fmt.Errorf("%s %s/%s has no key %s", kind, ns, name, key)
	}
	return data, nil
}

func readError(kind, ns, name string, err error) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%s %s/%s not found", kind, ns, name)
	}
	return fmt.Errorf("reading %s %s/%s: %w", kind, ns, name, err)
}

// trustObjects resolves spec.trust into the objects it names, each read and
// judged: one per ConfigMap or Secret key, one per ClusterTrustBundle entry
// (a signer's bundles as one, their union, as a projection by signer gets
// it), one per namespace a trust-manager Bundle targets. names are the
// entries' names, for the status.
func trustObjects(ctx context.Context, r client.Reader, trust []v1alpha1.TrustObject, oldCA, newCA side) (names []string, states []core.State) {
	for i, t := range trust {
		switch {
		case t.ConfigMap != nil, t.Secret != nil:
			kind, k := core.KindConfigMap, t.ConfigMap
			if t.Secret != nil {
				kind, k = core.KindSecret, t.Secret
			}
			o := core.Object{Kind: kind, Namespace: k.Namespace, Name: k.Name, Key: k.Key, Origin: i}
			names = append(names, o.String())
			data, err := readKey(ctx, r, string(kind), k.Namespace, k.Name, k.Key)
			states = append(states, judgeBundle(o, data, err, oldCA, newCA))
		case t.ClusterTrustBundle != nil:
			names = append(names, ctbName(*t.ClusterTrustBundle))
			states = append(states, readCTB(ctx, r, *t.ClusterTrustBundle, i, oldCA, newCA))
		case t.Bundle != nil:
			names = append(names, "Bundle "+t.Bundle.Name)
			states = append(states, readBundleTargets(ctx, r, t.Bundle.Name, i, oldCA, newCA)...)
		}
	}
	return names, states
}

func ctbName(ref v1alpha1.ClusterTrustBundleRef) string {
	if ref.Name != "" {
		return "ClusterTrustBundle " + ref.Name
	}
	s := "the ClusterTrustBundles of signer " + ref.SignerName
	if ref.LabelSelector != nil {
		s += " matching " + metav1.FormatLabelSelector(ref.LabelSelector)
	}
	return s
}

// judgeBundle says which CAs a bundle's certificates hold.
func judgeBundle(o core.Object, data []byte, err error, oldCA, newCA side) core.State {
	s := core.State{Object: o}
	if err != nil {
		s.Err = err.Error()
		return s
	}
	certs, err := hotcert.ParseCertificates(hotcert.Input{Name: o.String(), Data: data})
	if err != nil {
		s.Err = err.Error()
		return s
	}
	for _, c := range certs {
		fp := hotcert.FingerprintOf(c).String()
		s.HoldsNew = s.HoldsNew || newCA.SHA256[fp]
		s.HoldsOld = s.HoldsOld || oldCA.SHA256[fp]
	}
	return s
}

// readCTB reads a ClusterTrustBundle, or the union of a signer's bundles
// that the entry's selector matches (every one of the signer's without one).
func readCTB(ctx context.Context, r client.Reader, ref v1alpha1.ClusterTrustBundleRef, origin int, oldCA, newCA side) core.State {
	o := core.Object{Kind: core.KindClusterTrustBundle, Name: ref.Name, SignerName: ref.SignerName, Origin: origin}
	if ref.Name != "" {
		b := &certificatesv1.ClusterTrustBundle{}
		if err := r.Get(ctx, client.ObjectKey{Name: ref.Name}, b); err != nil {
			return judgeBundle(o, nil, readError("ClusterTrustBundle", "", ref.Name, err), oldCA, newCA)
		}
		return judgeBundle(o, []byte(b.Spec.TrustBundle), nil, oldCA, newCA)
	}
	sel := labels.Everything()
	if ref.LabelSelector != nil {
		var err error
		if sel, err = metav1.LabelSelectorAsSelector(ref.LabelSelector); err != nil {
			return judgeBundle(o, nil, fmt.Errorf("label selector: %w", err), oldCA, newCA)
		}
	}
	o.Selector = sel.String()
	var b bundles
	return b.union(ctx, r, o, oldCA, newCA)
}

// bundles lists the ClusterTrustBundles once per census, for the unions of
// signers' bundles.
type bundles struct {
	list *certificatesv1.ClusterTrustBundleList
	err  error
}

// union reads the union of o.SignerName's bundles that o.Selector matches,
// as the kubelet writes it into a projection by signer.
func (b *bundles) union(ctx context.Context, r client.Reader, o core.Object, oldCA, newCA side) core.State {
	sel, err := labels.Parse(o.Selector)
	if err != nil {
		return judgeBundle(o, nil, fmt.Errorf("label selector: %w", err), oldCA, newCA)
	}
	if b.list == nil && b.err == nil {
		b.list = &certificatesv1.ClusterTrustBundleList{}
		if b.err = r.List(ctx, b.list); b.err != nil {
			b.err = fmt.Errorf("listing ClusterTrustBundles: %w", b.err)
		}
	}
	if b.err != nil {
		return judgeBundle(o, nil, b.err, oldCA, newCA)
	}
	var union []byte
	for _, c := range b.list.Items {
		if c.Spec.SignerName == o.SignerName && sel.Matches(labels.Set(c.Labels)) {
			union = append(union, c.Spec.TrustBundle...)
			union = append(union, '\n')
		}
	}
	if len(union) == 0 {
		return judgeBundle(o, nil, fmt.Errorf("no ClusterTrustBundle of signer %s matches", o.SignerName), oldCA, newCA)
	}
	return judgeBundle(o, union, nil, oldCA, newCA)
}

// projectedSelections returns the states to add for the projections by
// signer that pods make with a selector of their own: for each signer a
// spec.trust entry names, one object per selector the pods' projections of
// that signer use (each gets the union of the bundles its selector matches,
// read from the API server), dated with the entry.
func projectedSelections(ctx context.Context, r client.Reader, states []core.State, pods []*podRecord, oldCA, newCA side) []core.State {
	entry := map[string]int{} // signer -> the origin of the entry naming it
	have := map[core.SignerSelection]bool{}
	for _, s := range states {
		if s.Kind == core.KindClusterTrustBundle && s.Name == "" && s.Role == core.RoleTrust {
			if _, ok := entry[s.SignerName]; !ok {
				entry[s.SignerName] = s.Origin
			}
			have[core.SignerSelection{Signer: s.SignerName, Selector: s.Selector}] = true
		}
	}
	if len(entry) == 0 {
		return nil
	}
	var b bundles
	var out []core.State
	var p corev1.Pod
	for _, rec := range pods {
		rec.fill(&p)
		for _, sel := range core.SignerSelections(&p) {
			origin, ok := entry[sel.Signer]
			if !ok || have[sel] {
				continue
			}
			have[sel] = true
			o := core.Object{Kind: core.KindClusterTrustBundle, SignerName: sel.Signer, Selector: sel.Selector, Origin: origin}
			out = append(out, b.union(ctx, r, o, oldCA, newCA))
		}
	}
	return out
}

// readBundleTargets reads a trust-manager Bundle's targets: the ConfigMap (or
// Secret) of its name, at its target key, in every namespace its target's
// namespaceSelector selects (every namespace without one).
func readBundleTargets(ctx context.Context, r client.Reader, name string, origin int, oldCA, newCA side) []core.State {
	failed := func(err error) []core.State {
		return []core.State{{Object: core.Object{Kind: core.KindConfigMap, Name: name, Origin: origin}, Err: err.Error()}}
	}
	b := &unstructured.Unstructured{}
	b.SetGroupVersionKind(bundleGVK)
	if err := r.Get(ctx, client.ObjectKey{Name: name}, b); err != nil {
		return failed(readError("Bundle", "", name, err))
	}
	kind, key := core.KindConfigMap, ""
	if k, ok, _ := unstructured.NestedString(b.Object, "spec", "target", "configMap", "key"); ok {
		key = k
	} else if k, ok, _ := unstructured.NestedString(b.Object, "spec", "target", "secret", "key"); ok {
		kind, key = core.KindSecret, k
	}
	if key == "" {
		return failed(fmt.Errorf("Bundle %s has no target key", name))
	}
	sel := labels.Everything()
	if m, ok, _ := unstructured.NestedMap(b.Object, "spec", "target", "namespaceSelector"); ok {
		ls := &metav1.LabelSelector{}
		if err := convertMap(m, ls); err != nil {
			return failed(fmt.Errorf("Bundle %s: namespaceSelector: %w", name, err))
		}
		var err error
		if sel, err = metav1.LabelSelectorAsSelector(ls); err != nil {
			return failed(fmt.Errorf("Bundle %s: namespaceSelector: %w", name, err))
		}
	}
	nss := &corev1.NamespaceList{}
	if err := r.List(ctx, nss, client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return failed(fmt.Errorf("listing the namespaces of Bundle %s: %w", name, err))
	}
	var out []core.State
	for _, ns := range nss.Items {
		o := core.Object{Kind: kind, Namespace: ns.Name, Name: name, Key: key, Origin: origin}
		data, err := readKey(ctx, r, string(kind), ns.Name, name, key)
		out = append(out, judgeBundle(o, data, err, oldCA, newCA))
	}
	if len(out) == 0 {
		return failed(fmt.Errorf("Bundle %s targets no namespace", name))
	}
	return out
}

// serverObjects reads spec.serverCertificates' Secrets: the leaf of each,
// and which side issued it. names are "namespace/name" (an entry naming a
// signer, whose signers entry is the signer, is read per pod: podcerts.go).
func serverObjects(ctx context.Context, r client.Reader, certs []v1alpha1.ServerCertificate, oldCA, newCA side) (names, signers []string, states []core.State) {
	for i, sc := range certs {
		if sc.SignerName != "" {
			names, signers = append(names, "the pod certificates of signer "+sc.SignerName), append(signers, sc.SignerName)
			continue
		}
		signers = append(signers, "")
		key := sc.Key
		if key == "" {
			key = "tls.crt"
		}
		o := core.Object{Kind: core.KindSecret, Namespace: sc.Namespace, Name: sc.Name, Key: key, Role: core.RoleServer, Origin: i}
		names = append(names, sc.Namespace+"/"+sc.Name)
		s := core.State{Object: o}
		data, err := readKey(ctx, r, string(core.KindSecret), sc.Namespace, sc.Name, key)
		var chain []*x509.Certificate
		if err == nil {
			chain, err = hotcert.ParseCertificates(hotcert.Input{Name: o.String(), Data: data})
		}
		if err != nil {
			s.Err = err.Error()
		} else {
			s.LeafSHA256, s.LeafSerial = hotcert.FingerprintOf(chain[0]).String(), hotcert.FormatSerial(chain[0].SerialNumber)
			s.HoldsNew, s.HoldsOld = evidence.Verifies(chain, newCA.certs), evidence.Verifies(chain, oldCA.certs)
		}
		states = append(states, s)
	}
	return names, signers, states
}

func convertMap(m map[string]any, into any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(m, into)
}
