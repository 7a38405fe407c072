package clusterview

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/hotcert/hotcert/rollout"
)

func TestSubPathVolumes(t *testing.T) {
	secretVol := func(name, secret string, items ...corev1.KeyToPath) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret, Items: items}}}
	}
	item := func(key, path string) corev1.KeyToPath { return corev1.KeyToPath{Key: key, Path: path} }
	spec := &corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init", VolumeMounts: []corev1.VolumeMount{{Name: "dir", MountPath: "/etc/ca.crt", SubPath: "certs"}}}},
		Containers: []corev1.Container{{Name: "app", VolumeMounts: []corev1.VolumeMount{
			{Name: "plain", MountPath: "/etc/tls/tls.crt", SubPath: "tls.crt"},
			{Name: "plain", MountPath: "/etc/tls/tls.key", SubPath: "..data/tls.key"},
			{Name: "whole", MountPath: "/etc/whole"}, // no subPath: dropped
			{Name: "expr", MountPath: "/etc/x", SubPathExpr: "$(POD_NAME)"},
			{Name: "proj", MountPath: "/etc/p", SubPath: "cfg/app.yaml"},
		}}},
		Volumes: []corev1.Volume{
			secretVol("plain", "tls"),
			secretVol("whole", "other"),
			secretVol("dir", "ca", item("ca.crt", "certs/ca.crt"), item("x", "elsewhere/x")),
			secretVol("expr", "per-pod", item("a", "a"), item("b", "b")),
			{Name: "proj", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, Items: []corev1.KeyToPath{item("app", "cfg/app.yaml"), item("other", "cfg/other.yaml")}}},
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "unrelated"}, Items: []corev1.KeyToPath{item("k", "k")}}},
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
			}}}},
			{Name: "empty", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		},
	}
	got := subPathVolumes(spec)
	want := []corev1.Volume{
		secretVol("plain", "tls", item("tls.crt", "tls.crt"), item("tls.key", "tls.key")),
		secretVol("dir", "ca", item("ca.crt", "certs/ca.crt")),
		secretVol("expr", "per-pod", item("a", "a"), item("b", "b")),
		{Name: "proj", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, Items: []corev1.KeyToPath{item("app", "cfg/app.yaml")}}},
		}}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	refs := rollout.PodSpecRefs(&corev1.PodSpec{Volumes: got})
	if r, ok := refs.Find(rollout.KindSecret, "tls"); !ok || r.All || len(r.Keys) != 2 {
		t.Errorf("refs of the reduced volumes: %+v", refs)
	}
	if _, ok := refs.Find(rollout.KindSecret, "other"); ok {
		t.Error("a volume mounted without subPath is a subPath consumer")
	}
}
