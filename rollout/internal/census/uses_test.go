package census

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

var (
	caCM      = Object{Kind: KindConfigMap, Namespace: "ns", Name: "ca", Key: "ca.crt"}
	caSecret  = Object{Kind: KindSecret, Namespace: "ns", Name: "trust", Key: "ca.crt"}
	ctbByName = Object{Kind: KindClusterTrustBundle, Name: "agents-2026"}
	ctbSigner = Object{Kind: KindClusterTrustBundle, SignerName: "example.com/agents", Origin: 1}
	serverTLS = Object{Kind: KindSecret, Namespace: "ns", Name: "cp-tls", Key: "tls.crt", Role: RoleServer}
	ctbRing1  = Object{Kind: KindClusterTrustBundle, SignerName: "example.com/agents", Selector: "ring=1", Origin: 1}
	podCert   = Object{Kind: KindPodCertificate, Namespace: "ns", Name: "p", SignerName: "example.com/cp", Role: RoleServer}
	otherCert = Object{Kind: KindPodCertificate, Namespace: "ns", Name: "q", SignerName: "example.com/cp", Role: RoleServer}
)

func container(name string, mounts ...corev1.VolumeMount) corev1.Container {
	return corev1.Container{Name: name, Image: "x", VolumeMounts: mounts}
}

// TestPodOf: how each container consumes each object, for every way a pod
// can consume one.
func TestPodOf(t *testing.T) {
	objects := []Object{caCM, caSecret, ctbByName, ctbSigner, serverTLS, ctbRing1, podCert, otherCert}
	t0 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		spec corev1.PodSpec
		want []Use
	}{
		{"volume", corev1.PodSpec{
			Volumes:    []corev1.Volume{{Name: "ca", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "ca"}}}}},
			Containers: []corev1.Container{container("app", corev1.VolumeMount{Name: "ca", MountPath: "/etc/ca"})},
		}, []Use{{Container: "app", Object: 0, How: HowVolume}}},
		{"volume-items-other-key", corev1.PodSpec{
			Volumes: []corev1.Volume{{Name: "ca", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "ca"}, Items: []corev1.KeyToPath{{Key: "other", Path: "other"}}}}}},
			Containers: []corev1.Container{container("app", corev1.VolumeMount{Name: "ca", MountPath: "/etc/ca"})},
		}, nil},
		{"projected-items", corev1.PodSpec{
			Volumes: []corev1.Volume{{Name: "p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "trust"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "tls/ca.pem"}}}},
				{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{Name: ptr.To("agents-2026"), Path: "ctb.pem"}},
				{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{SignerName: ptr.To("example.com/agents"), LabelSelector: &metav1.LabelSelector{}, Path: "signer.pem"}},
			}}}}},
			Containers: []corev1.Container{container("app", corev1.VolumeMount{Name: "p", MountPath: "/etc/p"})},
		}, []Use{{Container: "app", Object: 1, How: HowProjected}, {Container: "app", Object: 2, How: HowClusterTrustBundle}, {Container: "app", Object: 3, How: HowClusterTrustBundle}}},
		// A projection by signer gets the bundles its own selector matches:
		// it consumes the object of that selector; without a selector it
		// matches nothing (the kubelet's reading), so it consumes none.
		{"signer-selector", corev1.PodSpec{
			Volumes: []corev1.Volume{{Name: "p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{SignerName: ptr.To("example.com/agents"), Path: "ring.pem",
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"ring": "1"}}}},
				{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{SignerName: ptr.To("example.com/agents"), Path: "none.pem"}},
			}}}}},
			Containers: []corev1.Container{container("app", corev1.VolumeMount{Name: "p", MountPath: "/etc/p"})},
		}, []Use{{Container: "app", Object: 5, How: HowClusterTrustBundle}}},
		// A podCertificate projection of a signer consumes the certificate
		// the kubelet got for this pod (not another pod's); a subPath that
		// reaches one of the files it writes is never updated.
		{"pod-certificate", corev1.PodSpec{
			Volumes: []corev1.Volume{{Name: "p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{PodCertificate: &corev1.PodCertificateProjection{SignerName: "example.com/cp", KeyType: "ECDSAP256", CredentialBundlePath: "creds.pem"}},
				{PodCertificate: &corev1.PodCertificateProjection{SignerName: "example.com/other", KeyType: "ECDSAP256", CredentialBundlePath: "other.pem"}},
			}}}}},
			Containers: []corev1.Container{
				container("app", corev1.VolumeMount{Name: "p", MountPath: "/var/run/tls"}),
				container("sub", corev1.VolumeMount{Name: "p", MountPath: "/tls/creds.pem", SubPath: "creds.pem"}),
				container("elsewhere", corev1.VolumeMount{Name: "p", MountPath: "/tls/other.pem", SubPath: "other.pem"}),
			},
		}, []Use{{Container: "app", Object: 6, How: HowPodCertificate}, {Container: "sub", Object: 6, How: HowSubPath}}},
		{"subpath-reaches-key", corev1.PodSpec{
			Volumes: []corev1.Volume{{Name: "ca", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "ca"}}}}},
			Containers: []corev1.Container{
				container("sub", corev1.VolumeMount{Name: "ca", MountPath: "/etc/ssl/ca.crt", SubPath: "ca.crt"}),
				container("other", corev1.VolumeMount{Name: "ca", MountPath: "/etc/ssl/x", SubPath: "other.pem"}),
				container("expr", corev1.VolumeMount{Name: "ca", MountPath: "/etc/ssl/y", SubPathExpr: "$(POD)"}),
			},
		}, []Use{{Container: "expr", Object: 0, How: HowSubPath}, {Container: "sub", Object: 0, How: HowSubPath}}},
		{"subpath-directory-of-items", corev1.PodSpec{
			Volumes: []corev1.Volume{{Name: "p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "trust"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "tls/ca.pem"}}}},
			}}}}},
			Containers: []corev1.Container{container("app", corev1.VolumeMount{Name: "p", MountPath: "/etc/tls", SubPath: "tls"})},
		}, []Use{{Container: "app", Object: 1, How: HowSubPath}}},
		{"env-and-volume-keeps-env", corev1.PodSpec{
			Volumes: []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "trust"}}}},
			Containers: []corev1.Container{{Name: "app", Image: "x",
				VolumeMounts: []corev1.VolumeMount{{Name: "s", MountPath: "/s"}},
				Env: []corev1.EnvVar{{Name: "CA", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "trust"}, Key: "ca.crt"}}}},
				EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "ca"}}}},
			}},
		}, []Use{{Container: "app", Object: 0, How: HowEnv}, {Container: "app", Object: 1, How: HowEnv}}},
		{"init-containers-left-out", corev1.PodSpec{
			Volumes:        []corev1.Volume{{Name: "ca", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "ca"}}}}},
			InitContainers: []corev1.Container{container("init", corev1.VolumeMount{Name: "ca", MountPath: "/etc/ca"})},
			Containers:     []corev1.Container{container("app")},
		}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, Spec: c.spec,
				Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
					{Name: "app", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(t0)}}},
					{Name: "sub", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}},
				}}}
			got, ok := PodOf(p, objects)
			if ok != (len(c.want) > 0) || !reflect.DeepEqual(got.Uses, c.want) {
				t.Fatalf("uses %+v (ok %v), want %+v", got.Uses, ok, c.want)
			}
			if ok {
				if s, running := got.StartedAt("app"); !running || !s.Equal(t0) {
					t.Errorf("app started %v (running %v), want %v", s, running, t0)
				}
				if _, running := got.StartedAt("sub"); running {
					t.Error("a waiting container counts as started")
				}
			}
		})
	}
	// Another namespace's object of the same name is not consumed.
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "p"}, Spec: cases[0].spec}
	if _, ok := PodOf(p, objects); ok {
		t.Error("a pod of another namespace consumes ns/ca")
	}
}

// TestSignerSelections: the selections by signer a pod's mounted
// projections make, each once, with the kubelet's reading of the selector.
func TestSignerSelections(t *testing.T) {
	proj := func(path string, sel *metav1.LabelSelector) corev1.VolumeProjection {
		return corev1.VolumeProjection{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{SignerName: ptr.To("example.com/agents"), LabelSelector: sel, Path: path}}
	}
	ring1 := &metav1.LabelSelector{MatchLabels: map[string]string{"ring": "1"}}
	p := &corev1.Pod{Spec: corev1.PodSpec{
		Volumes: []corev1.Volume{
			{Name: "a", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				proj("1.pem", ring1), proj("2.pem", ring1.DeepCopy()), proj("all.pem", &metav1.LabelSelector{}), proj("none.pem", nil)}}}},
			{Name: "unmounted", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				proj("x.pem", &metav1.LabelSelector{MatchLabels: map[string]string{"ring": "2"}})}}}},
		},
		Containers: []corev1.Container{container("app", corev1.VolumeMount{Name: "a", MountPath: "/a"})},
	}}
	want := []SignerSelection{{"example.com/agents", "ring=1"}, {"example.com/agents", ""}}
	if got := SignerSelections(p); !reflect.DeepEqual(got, want) {
		t.Fatalf("selections %+v, want %+v", got, want)
	}
}
