package clusterview

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// A workload that is not managed and mounts a Secret or ConfigMap key with
// subPath never sees that key change (the kubelet bind-mounts the file once);
// the controller warns about it, so the cache keeps, of such a workload's pod
// template, what those mounts consume.

// SubPathTemplate is what the cache keeps of the pod template of a workload that
// is not managed: only its volumes that a container mounts with subPath, each
// reduced to what those mounts reach (see subPathVolumes), and no container, so
// that nothing takes it for a whole pod template. Of a template reduced
// already (no container), it returns the volumes as they are.
func SubPathTemplate(t *corev1.PodTemplateSpec) corev1.PodTemplateSpec {
	if len(t.Spec.Containers) == 0 {
		// Reduced already.
		return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Volumes: t.Spec.Volumes}}
	}
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Volumes: subPathVolumes(&t.Spec)}}
}

// subPathVolumes returns the volumes of spec that a container or init
// container mounts with subPath or subPathExpr, each reduced to the Secret and
// ConfigMap items such mounts reach: the items whose path is the subPath or
// lies under it, or, for a source without items (whose paths are its keys),
// an item for the key the subPath names. subPathExpr is expanded in the pod
// only, so a volume it mounts is kept whole.
func subPathVolumes(spec *corev1.PodSpec) []corev1.Volume {
	paths := map[string][]string{} // volume -> subPaths
	expr := map[string]bool{}      // volume -> mounted with subPathExpr
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for _, c := range cs {
			for _, m := range c.VolumeMounts {
				switch {
				case m.SubPathExpr != "":
					expr[m.Name] = true
				case m.SubPath != "":
					paths[m.Name] = append(paths[m.Name], m.SubPath)
				}
			}
		}
	}
	var out []corev1.Volume
	for _, v := range spec.Volumes {
		ps, whole := paths[v.Name], expr[v.Name]
		if len(ps) == 0 && !whole {
			continue
		}
		reduce := func(items []corev1.KeyToPath) []corev1.KeyToPath {
			if whole {
				return items
			}
			return subPathItems(items, ps)
		}
		kept := corev1.Volume{Name: v.Name}
		switch {
		case v.Secret != nil:
			if items := reduce(v.Secret.Items); whole || len(items) > 0 {
				kept.Secret = &corev1.SecretVolumeSource{SecretName: v.Secret.SecretName, Items: items, Optional: v.Secret.Optional}
			}
		case v.ConfigMap != nil:
			if items := reduce(v.ConfigMap.Items); whole || len(items) > 0 {
				kept.ConfigMap = &corev1.ConfigMapVolumeSource{LocalObjectReference: v.ConfigMap.LocalObjectReference, Items: items, Optional: v.ConfigMap.Optional}
			}
		case v.Projected != nil:
			var srcs []corev1.VolumeProjection
			for _, src := range v.Projected.Sources {
				if s := src.Secret; s != nil {
					if items := reduce(s.Items); whole || len(items) > 0 {
						srcs = append(srcs, corev1.VolumeProjection{Secret: &corev1.SecretProjection{LocalObjectReference: s.LocalObjectReference, Items: items, Optional: s.Optional}})
					}
				}
				if c := src.ConfigMap; c != nil {
					if items := reduce(c.Items); whole || len(items) > 0 {
						srcs = append(srcs, corev1.VolumeProjection{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: c.LocalObjectReference, Items: items, Optional: c.Optional}})
					}
				}
			}
			if len(srcs) > 0 {
				kept.Projected = &corev1.ProjectedVolumeSource{Sources: srcs}
			}
		}
		if kept.Secret != nil || kept.ConfigMap != nil || kept.Projected != nil {
			out = append(out, kept)
		}
	}
	return out
}

// subPathItems returns the items of a source that the subPaths reach. Without
// items, a source's files are its keys, at its top level (behind the
// kubelet's "..data" link): the key is the subPath's first element.
func subPathItems(items []corev1.KeyToPath, subPaths []string) []corev1.KeyToPath {
	var out []corev1.KeyToPath
	for _, p := range subPaths {
		p = strings.TrimPrefix(strings.Trim(p, "/"), "..data/")
		if len(items) == 0 {
			if key, _, _ := strings.Cut(p, "/"); key != "" && !strings.HasPrefix(key, "..") {
				out = append(out, corev1.KeyToPath{Key: key, Path: key})
			}
			continue
		}
		for _, it := range items {
			if path := strings.Trim(it.Path, "/"); path == p || strings.HasPrefix(path, p+"/") {
				out = append(out, it)
			}
		}
	}
	slices.SortFunc(out, func(a, b corev1.KeyToPath) int { return strings.Compare(a.Key+"/"+a.Path, b.Key+"/"+b.Path) })
	return slices.CompactFunc(out, func(a, b corev1.KeyToPath) bool { return a.Key == b.Key && a.Path == b.Path })
}
