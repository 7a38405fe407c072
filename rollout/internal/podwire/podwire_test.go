package podwire

import (
	"bytes"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
)

// pod is a Pod as the API server stores it, with every field Decode reads
// set, and many that it skips: managed fields, an image, an env value, a
// node, tolerations, conditions, a terminated init container.
func pod() *corev1.Pod {
	mode, user, no := ptr.To(int32(0o440)), ptr.To(int64(1000)), ptr.To(false)
	items := []corev1.KeyToPath{{Key: "ca.crt", Path: "ca/ca.crt", Mode: ptr.To(int32(0o400)), User: user}, {Key: "b", Path: "b"}}
	started := metav1.NewTime(time.Date(2026, 12, 1, 10, 0, 7, 5, time.UTC))
	ref := func(name string) corev1.LocalObjectReference { return corev1.LocalObjectReference{Name: name} }
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "app-7d9f-00001", UID: "0b1c7e1e-55c9-4a4e-9d2f-000000000001", ResourceVersion: "101",
			GenerateName: "app-7d9f-", Labels: map[string]string{"app": "app", "pod-template-hash": "7d9f"},
			Annotations:   map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-12-01T10:00:00Z"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}}}},
		Spec: corev1.PodSpec{
			NodeName:    "node-1",
			Tolerations: []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists}},
			Volumes: []corev1.Volume{
				{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s", Items: items, DefaultMode: mode, Optional: no, DefaultUser: user}}},
				{Name: "c", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: ref("c"), Items: items, DefaultMode: mode, Optional: ptr.To(true), DefaultUser: user}}},
				{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: mode, DefaultUser: user, Sources: []corev1.VolumeProjection{
					{Secret: &corev1.SecretProjection{LocalObjectReference: ref("s"), Items: items, Optional: no}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: ref("c"), Items: items, Optional: ptr.To(true)}},
					{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{Name: ptr.To("example.com:agents:1"), Path: "one.pem", Optional: no, User: user}},
					{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{SignerName: ptr.To("example.com/agents"), Path: "all.pem", LabelSelector: &metav1.LabelSelector{
						MatchLabels: map[string]string{"a": "1", "b": "2"},
						MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"x", "y"}},
							{Key: "gone", Operator: metav1.LabelSelectorOpDoesNotExist}}}}},
					{PodCertificate: &corev1.PodCertificateProjection{SignerName: "example.com/agents", KeyType: "ED25519", MaxExpirationSeconds: ptr.To(int32(86400)),
						CredentialBundlePath: "cred.pem", KeyPath: "tls.key", CertificateChainPath: "tls.crt", UserAnnotations: map[string]string{"team": "a"}, User: user}},
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}},
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: "vault", Path: "vault-token"}, ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: ref("both")}},
				}}}},
			},
			InitContainers: []corev1.Container{
				{Name: "migrate", Image: "registry.invalid/migrate:1", VolumeMounts: []corev1.VolumeMount{{Name: "c", MountPath: "/etc/ca"}}},
				{Name: "proxy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), VolumeMounts: []corev1.VolumeMount{{Name: "s", MountPath: "/etc/tls", ReadOnly: true}}},
			},
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.invalid/app:1", Args: []string{"--serve"}, RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
				Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP}, {ContainerPort: 8443, HostPort: 443, HostIP: "10.0.0.1"}},
				Env: []corev1.EnvVar{{Name: "MODE", Value: "secret-value"},
					{Name: "CA", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: ref("c"), Key: "ca.crt", Optional: no}}},
					{Name: "KEY", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: ref("s"), Key: "tls.key", Optional: ptr.To(true)}}},
					{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}},
				EnvFrom: []corev1.EnvFromSource{{Prefix: "CA_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: ref("c"), Optional: no}},
					{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: ref("s"), Optional: ptr.To(true)}}},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "c", MountPath: "/etc/ssl/ca.crt", SubPath: "ca.crt"},
					{Name: "s", MountPath: "/etc/s", SubPathExpr: "$(POD)", MountPropagation: ptr.To(corev1.MountPropagationHostToContainer)},
					{Name: "scratch", MountPath: "/tmp"},
				},
			}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.7", HostIP: "10.255.0.1",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			InitContainerStatuses: []corev1.ContainerStatus{
				{Name: "migrate", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}},
				{Name: "proxy", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}},
			},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: "registry.invalid/app:1", ImageID: "sha256:0", Ready: true,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}}},
	}
}

// podsToDecode are pod and its variants: one that carries the annotation of
// a streamed list's end, one being deleted, one without status, and one
// without anything.
func podsToDecode() []*corev1.Pod {
	end := pod()
	end.Annotations[metav1.InitialEventsAnnotationKey] = "true"
	deleted := pod()
	deleted.DeletionTimestamp = ptr.To(metav1.Now())
	pending := pod()
	pending.Status = corev1.PodStatus{}
	return []*corev1.Pod{pod(), end, deleted, pending, {}}
}

// podSubset is what Decode keeps of p.
func podSubset(p *corev1.Pod) *corev1.Pod {
	out := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
		DeletionTimestamp: p.DeletionTimestamp, Labels: p.Labels}}
	if v, ok := p.Annotations[metav1.InitialEventsAnnotationKey]; ok {
		out.Annotations = map[string]string{metav1.InitialEventsAnnotationKey: v}
	}
	for _, v := range p.Spec.Volumes {
		src := corev1.VolumeSource{Secret: v.Secret, ConfigMap: v.ConfigMap}
		if pr := v.Projected; pr != nil {
			src.Projected = &corev1.ProjectedVolumeSource{DefaultMode: pr.DefaultMode, DefaultUser: pr.DefaultUser}
			for _, s := range pr.Sources {
				src.Projected.Sources = append(src.Projected.Sources, corev1.VolumeProjection{Secret: s.Secret, ConfigMap: s.ConfigMap,
					ClusterTrustBundle: s.ClusterTrustBundle, PodCertificate: s.PodCertificate})
			}
		}
		out.Spec.Volumes = append(out.Spec.Volumes, corev1.Volume{Name: v.Name, VolumeSource: src})
	}
	containers := func(in []corev1.Container) []corev1.Container {
		var cs []corev1.Container
		for _, c := range in {
			k := corev1.Container{Name: c.Name, EnvFrom: c.EnvFrom, RestartPolicy: c.RestartPolicy}
			for _, p := range c.Ports {
				k.Ports = append(k.Ports, corev1.ContainerPort{Name: p.Name, ContainerPort: p.ContainerPort})
			}
			for _, e := range c.Env {
				kept := corev1.EnvVar{Name: e.Name}
				if f := e.ValueFrom; f != nil {
					kept.ValueFrom = &corev1.EnvVarSource{ConfigMapKeyRef: f.ConfigMapKeyRef, SecretKeyRef: f.SecretKeyRef}
				}
				k.Env = append(k.Env, kept)
			}
			for _, m := range c.VolumeMounts {
				k.VolumeMounts = append(k.VolumeMounts, corev1.VolumeMount{Name: m.Name, MountPath: m.MountPath, SubPath: m.SubPath, SubPathExpr: m.SubPathExpr})
			}
			cs = append(cs, k)
		}
		return cs
	}
	out.Spec.Containers, out.Spec.InitContainers = containers(p.Spec.Containers), containers(p.Spec.InitContainers)
	statuses := func(in []corev1.ContainerStatus) []corev1.ContainerStatus {
		var ss []corev1.ContainerStatus
		for _, s := range in {
			ss = append(ss, corev1.ContainerStatus{Name: s.Name, State: corev1.ContainerState{Running: s.State.Running}})
		}
		return ss
	}
	out.Status = corev1.PodStatus{Phase: p.Status.Phase, PodIP: p.Status.PodIP,
		ContainerStatuses: statuses(p.Status.ContainerStatuses), InitContainerStatuses: statuses(p.Status.InitContainerStatuses)}
	return out
}

// TestDecodeKeepsWhatARecordReads: of the protobuf encoding of a Pod,
// Decode keeps exactly podSubset of what the generated decoding reads: no
// env value, no image, no managed field.
func TestDecodeKeepsWhatARecordReads(t *testing.T) {
	for i, p := range podsToDecode() {
		b, err := p.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		var full corev1.Pod
		if err := full.Unmarshal(b); err != nil {
			t.Fatal(err)
		}
		var got corev1.Pod
		if err := Decode(b, &got); err != nil {
			t.Fatalf("pod %d: %v", i, err)
		}
		if want := podSubset(&full); !reflect.DeepEqual(&got, want) {
			t.Fatalf("pod %d: decoded\n%+v\nwant\n%+v", i, &got, want)
		}
		if bytes.Contains(mustMarshal(t, &got), []byte("secret-value")) || got.ManagedFields != nil || got.Spec.NodeName != "" {
			t.Fatalf("pod %d: decoded more than a record reads: %+v", i, &got)
		}
	}
	if err := Decode([]byte{0x0a, 0x05, 0x0a}, &corev1.Pod{}); err == nil {
		t.Fatal("a truncated Pod decoded")
	}
}

func mustMarshal(t *testing.T, p *corev1.Pod) []byte {
	t.Helper()
	b, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPodCodecsDecodeOnlyPods: the census's client of the pods decodes a Pod encoded
// as the API server encodes it (protobuf, in its envelope) with Decode,
// and everything else — a PodList, a Status, JSON — as client-go does.
func TestPodCodecsDecodeOnlyPods(t *testing.T) {
	codecs := newPodCodecs(scheme.Codecs.WithoutConversion())
	var proto, json runtime.SerializerInfo
	for _, info := range codecs.SupportedMediaTypes() {
		switch info.MediaType {
		case runtime.ContentTypeProtobuf:
			proto = info
		case runtime.ContentTypeJSON:
			json = info
		}
	}
	std := scheme.Codecs.WithoutConversion()
	encode := func(mediaType string, obj runtime.Object) []byte {
		t.Helper()
		info, ok := runtime.SerializerInfoForMediaType(std.SupportedMediaTypes(), mediaType)
		if !ok {
			t.Fatal(mediaType)
		}
		var buf bytes.Buffer
		if err := std.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion).Encode(obj, &buf); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	dec := codecs.DecoderToVersion(proto.Serializer, corev1.SchemeGroupVersion)
	p := pod()
	obj, err := runtime.Decode(dec, encode(runtime.ContentTypeProtobuf, p))
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := obj.(*corev1.Pod); !ok || got.Name != p.Name || got.Spec.NodeName != "" || got.ManagedFields != nil {
		t.Fatalf("a protobuf Pod decoded as %T %+v, want Decode's", obj, obj)
	}
	obj, err = runtime.Decode(dec, encode(runtime.ContentTypeProtobuf, &corev1.PodList{Items: []corev1.Pod{*p}}))
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := obj.(*corev1.PodList); !ok || len(l.Items) != 1 || l.Items[0].Spec.NodeName != p.Spec.NodeName {
		t.Fatalf("a PodList decoded as %T %+v, want client-go's decoding", obj, obj)
	}
	obj, err = runtime.Decode(dec, encode(runtime.ContentTypeProtobuf, &metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonGone}))
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := obj.(*metav1.Status); !ok || s.Reason != metav1.StatusReasonGone {
		t.Fatalf("a Status decoded as %T %+v", obj, obj)
	}
	obj, err = runtime.Decode(codecs.DecoderToVersion(json.Serializer, corev1.SchemeGroupVersion), encode(runtime.ContentTypeJSON, p))
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := obj.(*corev1.Pod); !ok || got.Spec.NodeName != p.Spec.NodeName {
		t.Fatalf("a JSON Pod decoded as %T %+v, want client-go's decoding", obj, obj)
	}
}

// FuzzDecodePod: whatever bytes the generated decoding reads as a Pod,
// Decode reads alike (what podSubset keeps of it), or fails where the
// generated code is laxer than protobuf's wire format (an overlong varint);
// of the Pod's own encoding, it always reads it alike.
func FuzzDecodePod(f *testing.F) {
	for _, p := range podsToDecode() {
		b, err := p.Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var full corev1.Pod
		if err := full.Unmarshal(b); err != nil {
			return
		}
		want := podSubset(&full)
		var got corev1.Pod
		if err := Decode(b, &got); err == nil && !reflect.DeepEqual(&got, want) {
			t.Fatalf("decoded\n%+v\nwant\n%+v", &got, want)
		}
		canonical, err := full.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		var again corev1.Pod
		if err := Decode(canonical, &again); err != nil {
			t.Fatalf("the Pod's own encoding: %v", err)
		}
		var fullAgain corev1.Pod
		if err := fullAgain.Unmarshal(canonical); err != nil {
			t.Fatal(err)
		}
		if want := podSubset(&fullAgain); !reflect.DeepEqual(&again, want) {
			t.Fatalf("the Pod's own encoding decoded\n%+v\nwant\n%+v", &again, want)
		}
	})
}
