package census

import (
	"cmp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodOf returns what the census needs of p: the uses its containers make of
// objects (indexes into objects), and the start times of its running
// containers (and running sidecars). ok is false when it uses none. Init
// containers are left out of the uses: they have run to completion, and what
// they read is held by no process that serves or dials.
func PodOf(p *corev1.Pod, objects []Object) (pod Pod, ok bool) {
	uses := podUses(&p.Spec, p.Namespace, p.Name, objects)
	if len(uses) == 0 {
		return Pod{}, false
	}
	var started []Start
	for _, s := range slices.Concat(p.Status.ContainerStatuses, p.Status.InitContainerStatuses) {
		if r := s.State.Running; r != nil && !r.StartedAt.IsZero() {
			started = append(started, StartOf(s.Name, r.StartedAt.Time))
		}
	}
	return Pod{Namespace: p.Namespace, Name: p.Name, Labels: p.Labels, Started: started, Uses: uses}, true
}

// podUses returns, per container and object, how the container consumes the
// object; a container consuming one object several ways keeps the weakest
// (one that is never updated over one that is).
func podUses(spec *corev1.PodSpec, ns, pod string, objects []Object) []Use {
	vols := map[string]*corev1.Volume{}
	for i := range spec.Volumes {
		vols[spec.Volumes[i].Name] = &spec.Volumes[i]
	}
	type use struct {
		container string
		obj       int
	}
	byKey := map[use]How{}
	add := func(container string, obj int, how How) {
		k := use{container, obj}
		if prev, ok := byKey[k]; ok && !prev.updated() {
			return
		}
		byKey[k] = how
	}
	for _, c := range spec.Containers {
		for _, m := range c.VolumeMounts {
			v := vols[m.Name]
			if v == nil {
				continue
			}
			for _, f := range volumeFiles(v) {
				for i, o := range objects {
					if !f.matches(o, ns, pod) {
						continue
					}
					how := f.how
					path := f.path
					if f.key == "" && f.kind != KindClusterTrustBundle && f.kind != KindPodCertificate {
						path = o.Key // a source without items puts each key at its name
					}
					if m.SubPathExpr != "" || (m.SubPath != "" && reaches(m.SubPath, path)) {
						how = HowSubPath
					} else if m.SubPath != "" {
						continue // the subPath mounts another file
					}
					add(c.Name, i, how)
				}
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				continue
			}
			if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
				addMatching(objects, KindConfigMap, ns, r.Name, r.Key, func(i int) { add(c.Name, i, HowEnv) })
			}
			if r := e.ValueFrom.SecretKeyRef; r != nil {
				addMatching(objects, KindSecret, ns, r.Name, r.Key, func(i int) { add(c.Name, i, HowEnv) })
			}
		}
		for _, e := range c.EnvFrom {
			if r := e.ConfigMapRef; r != nil {
				addMatching(objects, KindConfigMap, ns, r.Name, "", func(i int) { add(c.Name, i, HowEnv) })
			}
			if r := e.SecretRef; r != nil {
				addMatching(objects, KindSecret, ns, r.Name, "", func(i int) { add(c.Name, i, HowEnv) })
			}
		}
	}
	uses := make([]Use, 0, len(byKey))
	for k, how := range byKey {
		uses = append(uses, Use{Container: k.container, Object: k.obj, How: how})
	}
	slices.SortFunc(uses, func(a, b Use) int {
		return cmp.Or(cmp.Compare(a.Container, b.Container), cmp.Compare(a.Object, b.Object))
	})
	return uses
}

// addMatching calls f with the index of each ConfigMap or Secret object of
// namespace ns named name whose key is key (any key when key is "").
func addMatching(objects []Object, kind Kind, ns, name, key string, f func(int)) {
	for i, o := range objects {
		if o.Kind == kind && o.Namespace == ns && o.Name == name && (key == "" || o.Key == key) {
			f(i)
		}
	}
}

// file is one source of a volume and the path it puts a key at ("" for
// every key of the source, each at its own name).
type file struct {
	kind      Kind
	name, key string // key "" for every key (then path is the key's)
	path      string
	signer    string // a clusterTrustBundle source by signer (name "")
	selector  string // its label selector (labels.Selector.String())
	how       How
}

func (f file) matches(o Object, ns, pod string) bool {
	if o.Kind != f.kind {
		return false
	}
	if f.kind == KindPodCertificate {
		return o.Namespace == ns && o.Name == pod && o.SignerName == f.signer
	}
	if f.kind == KindClusterTrustBundle {
		if o.Name != "" {
			return o.Name == f.name
		}
		return f.name == "" && o.SignerName == f.signer && o.Selector == f.selector
	}
	return o.Namespace == ns && o.Name == f.name && (f.key == "" || o.Key == f.key)
}

// volumeFiles lists what a volume holds: for a source without items, one
// file per key (key ""), else one per item; a clusterTrustBundle projection
// at its path.
func volumeFiles(v *corev1.Volume) []file {
	var out []file
	items := func(kind Kind, name string, its []corev1.KeyToPath, how How) {
		if len(its) == 0 {
			out = append(out, file{kind: kind, name: name, how: how})
			return
		}
		for _, it := range its {
			out = append(out, file{kind: kind, name: name, key: it.Key, path: it.Path, how: how})
		}
	}
	switch {
	case v.Secret != nil:
		items(KindSecret, v.Secret.SecretName, v.Secret.Items, HowVolume)
	case v.ConfigMap != nil:
		items(KindConfigMap, v.ConfigMap.Name, v.ConfigMap.Items, HowVolume)
	case v.Projected != nil:
		for _, src := range v.Projected.Sources {
			if s := src.Secret; s != nil {
				items(KindSecret, s.Name, s.Items, HowProjected)
			}
			if c := src.ConfigMap; c != nil {
				items(KindConfigMap, c.Name, c.Items, HowProjected)
			}
			if t := src.ClusterTrustBundle; t != nil {
				f := file{kind: KindClusterTrustBundle, path: t.Path, how: HowClusterTrustBundle}
				switch {
				case t.Name != nil:
					f.name = *t.Name
				case t.SignerName != nil:
					sel, ok := ProjectionSelector(t)
					if !ok {
						continue // it selects nothing
					}
					f.signer, f.selector = *t.SignerName, sel
				}
				out = append(out, f)
			}
			if c := src.PodCertificate; c != nil {
				// One file per path it writes (a subPath may reach one).
				for _, path := range []string{c.CredentialBundlePath, c.CertificateChainPath, c.KeyPath} {
					if path != "" {
						out = append(out, file{kind: KindPodCertificate, signer: c.SignerName, path: path, how: HowPodCertificate})
					}
				}
			}
		}
	}
	return out
}

// reaches reports whether a subPath mount of a volume reaches the file at
// path: the file is at the subPath or under it (the kubelet's "..data/"
// prefix aside).
func reaches(subPath, path string) bool {
	p := strings.TrimPrefix(strings.Trim(subPath, "/"), "..data/")
	path = strings.Trim(path, "/")
	return path == p || strings.HasPrefix(path, p+"/")
}

// SignerSelection is a clusterTrustBundle projection by signer: the union of
// the signer's ClusterTrustBundles whose labels match Selector
// (labels.Selector.String(); "" matches every one).
type SignerSelection struct {
	Signer, Selector string
}

// SignerSelections lists the clusterTrustBundle projections by signer that
// the containers of p mount (what their bundles hold must be read for each),
// once each. A projection whose selector matches nothing is left out.
func SignerSelections(p *corev1.Pod) []SignerSelection {
	mounted := map[string]bool{}
	for _, c := range p.Spec.Containers {
		for _, m := range c.VolumeMounts {
			mounted[m.Name] = true
		}
	}
	var out []SignerSelection
	for _, v := range p.Spec.Volumes {
		if !mounted[v.Name] {
			continue
		}
		for _, f := range volumeFiles(&v) {
			s := SignerSelection{f.signer, f.selector}
			if f.kind == KindClusterTrustBundle && f.signer != "" && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

// PodCertificateSigners lists the signers of the podCertificate
// projections that the containers of p mount, once each.
func PodCertificateSigners(p *corev1.Pod) []string {
	mounted := map[string]bool{}
	for _, c := range p.Spec.Containers {
		for _, m := range c.VolumeMounts {
			mounted[m.Name] = true
		}
	}
	var out []string
	for _, v := range p.Spec.Volumes {
		if !mounted[v.Name] || v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if c := src.PodCertificate; c != nil && !slices.Contains(out, c.SignerName) {
				out = append(out, c.SignerName)
			}
		}
	}
	return out
}

// ProjectionSelector is the selector of a clusterTrustBundle projection by
// signer, as the kubelet reads it: ok false when the projection selects
// nothing (no selector: "match nothing", or one that does not parse), ""
// when it selects every bundle of the signer (an empty selector).
func ProjectionSelector(t *corev1.ClusterTrustBundleProjection) (selector string, ok bool) {
	if t.LabelSelector == nil {
		return "", false
	}
	sel, err := metav1.LabelSelectorAsSelector(t.LabelSelector)
	if err != nil {
		return "", false
	}
	return sel.String(), true
}
