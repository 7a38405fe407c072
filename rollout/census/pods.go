package census

import (
	"hash/maphash"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"time"
	"unique"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	core "github.com/hotcert/hotcert/rollout/internal/census"
)

// podRecord is what the census keeps of a pod: 80 bytes, its name and 8
// bytes a running container (BenchmarkPodRecords), where even a stripped
// *corev1.Pod takes more than 1,240 bytes of struct alone. What every pod
// of a ReplicaSet has alike — its namespace, labels and reduced spec — is
// one shape that they share (see interner); what is the pod's own is its
// name, UID, IP and the start time of each running container. A pod that
// is going (deleted, or its containers have all exited) has a shape of its
// own kind and is not kept (podStore).
//
// A record is immutable once built: the index and every census read the
// same one.
type podRecord struct {
	*podShape
	name string
	uid  podUID // to match a pod's PodCertificateRequests
	ip   podIP  // to scrape it
	// started are when the running containers and sidecars (init
	// containers that keep running) started, in Unix nanoseconds, one for
	// each of the shared spec's Containers then InitContainers, 0 for one
	// that is not running, without the zeros at its end (nil when none
	// runs): 8 bytes a container, where a core.Start takes 24 and a pointer
	// for the collector to follow.
	started []int64
}

// podShape is what the pods of a ReplicaSet have alike, interned.
type podShape struct {
	namespace string
	labels    *map[string]string // shared; nil for none
	spec      *corev1.PodSpec    // shared, reduced (reducedSpec); nil for a pod that is going
	gone      bool               // being deleted, or its containers have all exited (Succeeded, Failed)
}

func (r *podRecord) key() string { return r.namespace + "/" + r.name }

func (r *podRecord) labelSet() map[string]string {
	if r.labels == nil {
		return nil
	}
	return *r.labels
}

// fill makes p the record as a Pod, what rollout/internal/census reads:
// namespace, name and labels, the reduced spec and the running containers'
// start times. p shares the record's spec and labels: it must not be
// changed, and it is reused from one record to the next (fill keeps its
// status slices) so that a census of 10,000 pods does not allocate 10,000
// Pods.
func (r *podRecord) fill(p *corev1.Pod) {
	cs, is := p.Status.ContainerStatuses[:0], p.Status.InitContainerStatuses[:0]
	*p = corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: r.namespace, Name: r.name, Labels: r.labelSet()},
		Spec: *r.spec, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	for i, at := range r.started {
		if at == 0 {
			continue
		}
		s := corev1.ContainerStatus{Name: r.container(i).Name,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Unix(0, at).UTC())}}}
		if i < len(r.spec.Containers) {
			cs = append(cs, s)
		} else {
			is = append(is, s)
		}
	}
	p.Status.ContainerStatuses, p.Status.InitContainerStatuses = cs, is
}

// container is the i-th of the spec's Containers then InitContainers.
func (r *podRecord) container(i int) *corev1.Container {
	if n := len(r.spec.Containers); i >= n {
		return &r.spec.InitContainers[i-n]
	}
	return &r.spec.Containers[i]
}

// appendStarts appends to out when the record's running containers started,
// as the census judges them (each container's name the spec's string).
func (r *podRecord) appendStarts(out []core.Start) []core.Start {
	for i, at := range r.started {
		if at != 0 {
			out = append(out, core.StartOf(r.container(i).Name, time.Unix(0, at)))
		}
	}
	return out
}

// records builds pod records, sharing what pods have alike.
type records struct {
	specs  *interner[corev1.PodSpec]
	labels *interner[map[string]string]
	shapes *interner[podShape] // of interned labels and specs: compared by pointer
}

func newRecords() *records {
	return &records{
		specs: newInterner(hashSpec, func(a, b *corev1.PodSpec) bool { return reflect.DeepEqual(a, b) }),
		labels: newInterner(func(h *maphash.Hash, m *map[string]string) {
			for _, k := range slices.Sorted(maps.Keys(*m)) {
				h.WriteString(k)
				h.WriteByte(0)
				h.WriteString((*m)[k])
				h.WriteByte(0)
			}
		}, func(a, b *map[string]string) bool { return maps.Equal(*a, *b) }),
		shapes: newInterner(func(h *maphash.Hash, s *podShape) { maphash.WriteComparable(h, *s) },
			func(a, b *podShape) bool { return *a == *b }),
	}
}

// hashSpec hashes of a reduced spec what tells specs apart most often: each
// volume's name and the objects its sources name, each container's name,
// ports and mounts. Equal specs hash alike; specs that differ only elsewhere
// share a bucket, where the interner's equal (reflect.DeepEqual) tells them
// apart. (Hashing the spec's protobuf encoding ran the Marshal and Size code
// of most of core/v1 for it, pages of the process's memory.)
func hashSpec(h *maphash.Hash, s *corev1.PodSpec) {
	str := func(s string) {
		h.WriteString(s)
		h.WriteByte(0)
	}
	for _, v := range s.Volumes {
		str(v.Name)
		if v.Secret != nil {
			str(v.Secret.SecretName)
		}
		if v.ConfigMap != nil {
			str(v.ConfigMap.Name)
		}
		if v.Projected != nil {
			for _, src := range v.Projected.Sources {
				switch {
				case src.Secret != nil:
					str(src.Secret.Name)
				case src.ConfigMap != nil:
					str(src.ConfigMap.Name)
				case src.ClusterTrustBundle != nil:
					str(ptr.Deref(src.ClusterTrustBundle.Name, ""))
					str(ptr.Deref(src.ClusterTrustBundle.SignerName, ""))
				case src.PodCertificate != nil:
					str(src.PodCertificate.SignerName)
				}
			}
		}
	}
	for _, cs := range [...][]corev1.Container{s.Containers, s.InitContainers} {
		h.WriteByte(1)
		for _, c := range cs {
			str(c.Name)
			for _, p := range c.Ports {
				maphash.WriteComparable(h, p.ContainerPort)
			}
			for _, m := range c.VolumeMounts {
				str(m.Name)
				str(m.MountPath)
				str(m.SubPath)
			}
		}
	}
}

// record is the record of pod p, that of a pod that is gone if it is going
// (being deleted, or its containers have all exited).
func (rs *records) record(p *corev1.Pod) *podRecord {
	if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return rs.gone(p.Namespace, p.Name)
	}
	r := &podRecord{name: p.Name}
	shape := podShape{namespace: unique.Make(p.Namespace).Value()}
	r.uid = compactUID(p.UID)
	r.ip = compactIP(p.Status.PodIP)
	if len(p.Labels) > 0 {
		l := maps.Clone(p.Labels)
		shape.labels = rs.labels.intern(&l)
	}
	shape.spec = rs.specs.intern(reducedSpec(&p.Spec))
	r.podShape = rs.shapes.intern(&shape)
	r.started = startTimes(shape.spec, p.Status)
	return r
}

// gone is the record of a pod that is going: the index drops it.
func (rs *records) gone(namespace, name string) *podRecord {
	return &podRecord{name: name, podShape: rs.shapes.intern(&podShape{namespace: unique.Make(namespace).Value(), gone: true})}
}

// startTimes are when the running containers and sidecars of a pod whose
// reduced spec is spec started (an init container that exits it does not
// keep), as podRecord.started keeps them: one allocation, of the length it
// needs. A container that started at the Unix epoch's first nanosecond
// would read as not running (its 0).
func startTimes(spec *corev1.PodSpec, st corev1.PodStatus) []int64 {
	groups := [...]struct {
		containers []corev1.Container
		statuses   []corev1.ContainerStatus
		first      int // the index of the group's first container in started
	}{{spec.Containers, st.ContainerStatuses, 0}, {spec.InitContainers, st.InitContainerStatuses, len(spec.Containers)}}
	each := func(f func(i int, at int64)) {
		for _, g := range groups {
			for _, s := range g.statuses {
				if r := s.State.Running; r != nil && !r.StartedAt.IsZero() {
					if i := slices.IndexFunc(g.containers, func(c corev1.Container) bool { return c.Name == s.Name }); i >= 0 {
						f(g.first+i, r.StartedAt.UnixNano())
					}
				}
			}
		}
	}
	n := 0
	each(func(i int, at int64) {
		if at != 0 {
			n = max(n, i+1)
		}
	})
	if n == 0 {
		return nil
	}
	out := make([]int64, n)
	each(func(i int, at int64) {
		if i < n {
			out[i] = at
		}
	})
	return out
}

// reducedSpec is what the census reads of a pod's spec, the same for every
// pod of a ReplicaSet so that they share one:
//   - the volumes that can carry an object the census follows — Secret,
//     ConfigMap and projected volumes, each projected volume without its
//     serviceAccountToken and downwardAPI sources (it keeps the rest:
//     secret, configMap, clusterTrustBundle, podCertificate) — renamed v0,
//     v1, … in order, their mounts with them: the name of the volume that
//     the API server adds for the service account token ends in random
//     letters, different in each pod, and no volume's name is judged;
//   - of each container (and sidecar: an init container with restartPolicy
//     Always), its name, ports (name and number), the mounts of those
//     volumes (path, subPath, subPathExpr), its env references to Secrets and
//     ConfigMaps (never a value: it may be secret) and envFrom.
func reducedSpec(in *corev1.PodSpec) *corev1.PodSpec {
	out := &corev1.PodSpec{}
	names := map[string]string{}
	for _, v := range in.Volumes {
		src := corev1.VolumeSource{Secret: v.Secret, ConfigMap: v.ConfigMap}
		if pr := v.Projected; pr != nil {
			var sources []corev1.VolumeProjection
			for _, s := range pr.Sources {
				s.ServiceAccountToken, s.DownwardAPI = nil, nil
				if s != (corev1.VolumeProjection{}) {
					sources = append(sources, s)
				}
			}
			if len(sources) > 0 {
				src.Projected = &corev1.ProjectedVolumeSource{Sources: sources, DefaultMode: pr.DefaultMode}
			}
		}
		if src == (corev1.VolumeSource{}) {
			continue
		}
		n := "v" + strconv.Itoa(len(out.Volumes))
		names[v.Name] = n
		out.Volumes = append(out.Volumes, corev1.Volume{Name: n, VolumeSource: src})
	}
	out.Containers = reducedContainers(in.Containers, names, false)
	out.InitContainers = reducedContainers(in.InitContainers, names, true)
	return out
}

func reducedContainers(in []corev1.Container, volumes map[string]string, sidecarsOnly bool) []corev1.Container {
	var out []corev1.Container
	for _, c := range in {
		if sidecarsOnly && (c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways) {
			continue
		}
		k := corev1.Container{Name: c.Name, RestartPolicy: c.RestartPolicy, EnvFrom: c.EnvFrom}
		for _, p := range c.Ports {
			k.Ports = append(k.Ports, corev1.ContainerPort{Name: p.Name, ContainerPort: p.ContainerPort})
		}
		for _, m := range c.VolumeMounts {
			if n, ok := volumes[m.Name]; ok {
				k.VolumeMounts = append(k.VolumeMounts, corev1.VolumeMount{Name: n, MountPath: m.MountPath, SubPath: m.SubPath, SubPathExpr: m.SubPathExpr})
			}
		}
		for _, e := range c.Env {
			if f := e.ValueFrom; f != nil && (f.SecretKeyRef != nil || f.ConfigMapKeyRef != nil) {
				k.Env = append(k.Env, corev1.EnvVar{Name: e.Name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: f.SecretKeyRef, ConfigMapKeyRef: f.ConfigMapKeyRef}})
			}
		}
		out = append(out, k)
	}
	return out
}
