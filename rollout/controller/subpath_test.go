package controller

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/hotcert/hotcert/rollout"
)

// subPathMount is a pod spec that mounts key of Secret name with subPath, and
// reads the Secret's key "env" as an env var.
func subPathMount(name, key string) corev1.PodSpec {
	return corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:1",
			VolumeMounts: []corev1.VolumeMount{{Name: "tls", MountPath: "/etc/tls/" + key, SubPath: key}},
			Env: []corev1.EnvVar{{Name: "ENV", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: "env"}}}},
		}},
		Volumes: []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: name}}}},
	}
}

// TestSubPathConsumerWarned: a workload that is not opted in and mounts a key
// with subPath gets one Warning Event and one count per change of that key,
// none for a change of a key it does not mount that way, and none when it is
// reconciled again; the cache keeps only its subPath volumes. A workload
// mounting the same Secret without subPath is not warned.
func TestSubPathConsumerWarned(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	first := createSecret(t, secret(ns, "tls", map[string]string{"tls.crt": "1", "env": "1"}))
	create(t, deployment(ns, "sub", 0, subPathMount("tls", "tls.crt"), nil))
	create(t, deployment(ns, "dir", 0, mountAll("tls"), nil))
	c := startController(t, ns, testOptions())
	count := func() int { return int(testutilCounter(c.ctl.metrics.subPath.WithLabelValues("Deployment"))) }

	var cached appsv1.Deployment
	waitFor(t, "the cache to hold the workload", func() (bool, error) {
		return c.mgr.GetCache().Get(testContext(t), types.NamespacedName{Namespace: ns, Name: "sub"}, &cached) == nil, nil
	})
	if spec := cached.Spec.Template.Spec; len(spec.Containers) != 0 || len(spec.Volumes) != 1 || spec.Volumes[0].Secret == nil || len(spec.Volumes[0].Secret.Items) != 1 {
		t.Fatalf("cached pod spec of a workload not opted in: %s", mustJSON(spec))
	}
	// The first look records the baseline; the change comes after it.
	waitFor(t, "the subPath consumer to be looked at", func() (bool, error) { return c.digested(rollout.KindSecret, "tls", first.ResourceVersion), nil })

	updateSecret(t, ns, "tls", setKey("env", "2"))
	holds(t, 500*time.Millisecond, "no warning for a key not mounted with subPath", func() (bool, error) { return count() == 0, nil })

	updateSecret(t, ns, "tls", setKey("tls.crt", "2"))
	ev := waitEvent(t, ns, "sub", eventSubPath, "Secret tls key tls.crt changed")
	if ev.Type != corev1.EventTypeWarning {
		t.Fatalf("event type %s", ev.Type)
	}
	t.Logf("event: %s", ev.Message)
	waitFor(t, "one count", func() (bool, error) { return count() == 1, nil })

	// Reconciled again (an edit of the workload): no second warning for the
	// same change.
	patchAnnotations(t, &cached, map[string]*string{"touched": ptr.To("1")})
	holds(t, 500*time.Millisecond, "one warning per change", func() (bool, error) { return count() == 1, nil })

	updateSecret(t, ns, "tls", setKey("tls.crt", "3"))
	waitFor(t, "a count per change", func() (bool, error) { return count() == 2, nil })
	if n := countEvents(t, ns, "dir", eventSubPath, ""); n != 0 {
		t.Fatalf("a workload mounting the Secret without subPath was warned %d times", n)
	}
}

// TestSubPathOptedInRolls: an opted-in workload that mounts a key with
// subPath is rolled when the key changes, like an env-var consumer: the real
// kube-controller-manager makes a ReplicaSet whose pod template has the new
// hash; it gets no subPath warning.
func TestSubPathOptedInRolls(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	createSecret(t, secret(ns, "tls", map[string]string{"ca.crt": string(hotcertCA().CertPEM), "env": "1"}))
	create(t, deployment(ns, "app", 0, subPathMount("tls", "ca.crt"), optIn))
	waitReplicaSets(t, ns, "app", 1)
	c := startController(t, ns, testOptions())
	waitAdopted(t, ns, "app")

	updateSecret(t, ns, "tls", setKey("ca.crt", string(hotcertCA().CertPEM)))
	waitReplicaSets(t, ns, "app", 2)
	waitEvent(t, ns, "app", eventRolled, "Secret tls key ca.crt changed")
	d := getDeployment(t, ns, "app")
	hash := d.Annotations[rollout.AnnotationAppliedHash]
	waitFor(t, "a ReplicaSet whose pods get the new hash", func() (bool, error) {
		list, err := clientset().AppsV1().ReplicaSets(ns).List(testContext(t), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, rs := range list.Items {
			if rollout.Stamped(&rs.Spec.Template) == hash && metav1.IsControlledBy(&rs, d) {
				return true, nil
			}
		}
		return false, nil
	})
	if n := int(testutilCounter(c.ctl.metrics.subPath.WithLabelValues("Deployment"))); n != 0 {
		t.Fatalf("an opted-in workload was counted as a subPath consumer %d times", n)
	}
}
