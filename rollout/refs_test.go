package rollout_test

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/hotcert/hotcert/rollout"
)

func TestPodSpecRefs(t *testing.T) {
	spec := &corev1.PodSpec{
		Volumes: []corev1.Volume{
			{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "api-tls"}}},
			{Name: "ca", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "bundle"},
				Items:                []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}},
			}}},
			{Name: "proj", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "client"}, Items: []corev1.KeyToPath{{Key: "tls.crt"}, {Key: "tls.key"}}, Optional: ptr.To(true)}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}},
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
			}}}},
			{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		},
		InitContainers: []corev1.Container{{
			Name: "init",
			Env: []corev1.EnvVar{{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "api-token"}, Key: "token"}}}},
		}},
		Containers: []corev1.Container{{
			Name:    "app",
			EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "env"}, Optional: ptr.To(true)}}},
			Env: []corev1.EnvVar{
				{Name: "PLAIN", Value: "x"},
				{Name: "CA", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "bundle"}, Key: "extra.pem", Optional: ptr.To(true)}}},
				{Name: "CLIENT_KEY", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "client"}, Key: "tls.key"}}},
				{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			},
		}},
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "registry"}},
	}
	got := rollout.PodSpecRefs(spec)
	want := rollout.Refs{
		{Kind: rollout.KindConfigMap, Name: "bundle", Keys: []rollout.KeyRef{{Key: "ca.crt"}, {Key: "extra.pem", Optional: true}},
			Uses: []string{"volume ca", "env CA in container app"}},
		{Kind: rollout.KindConfigMap, Name: "env", All: true, Optional: true, Uses: []string{"envFrom in container app"}},
		{Kind: rollout.KindConfigMap, Name: "settings", All: true, Uses: []string{"volume proj"}},
		{Kind: rollout.KindSecret, Name: "api-tls", All: true, Uses: []string{"volume tls"}},
		{Kind: rollout.KindSecret, Name: "api-token", Keys: []rollout.KeyRef{{Key: "token"}}, Uses: []string{"env TOKEN in container init"}},
		// The projection is optional but the env var is not: the object and
		// tls.key are required, tls.crt is not.
		{Kind: rollout.KindSecret, Name: "client", Keys: []rollout.KeyRef{{Key: "tls.crt", Optional: true}, {Key: "tls.key"}},
			Uses: []string{"volume proj", "env CLIENT_KEY in container app"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("PodSpecRefs:\n got %+v\nwant %+v", got, want)
	}
	if r, ok := got.Find(rollout.KindSecret, "client"); !ok || r.Optional {
		t.Errorf("Find(Secret client) = %+v, %v", r, ok)
	}
	if _, ok := got.Find(rollout.KindSecret, "registry"); ok {
		t.Error("imagePullSecrets are not consumed by the workload and must not be referenced")
	}
}

func TestRefsMerge(t *testing.T) {
	a := rollout.Refs{
		{Kind: rollout.KindSecret, Name: "ca", Keys: []rollout.KeyRef{{Key: "ca.crt", Optional: true}}, Optional: true, Uses: []string{"volume ca"}},
	}
	b := rollout.Refs{
		{Kind: rollout.KindConfigMap, Name: "cfg", All: true},
		{Kind: rollout.KindSecret, Name: "ca", Keys: []rollout.KeyRef{{Key: "ca.crt"}, {Key: "b.crt"}}, Uses: []string{"Agent a → ModelConfig m"}},
	}
	got := a.Merge(b)
	want := rollout.Refs{
		{Kind: rollout.KindConfigMap, Name: "cfg", All: true},
		{Kind: rollout.KindSecret, Name: "ca", Keys: []rollout.KeyRef{{Key: "b.crt"}, {Key: "ca.crt"}}, Uses: []string{"volume ca", "Agent a → ModelConfig m"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}
