package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/hotcert/hotcert/rollout"
)

// TestConfigMapsAndProjections: a ConfigMap consumed through a projected
// volume with items rolls on a consumed key only; a bad annotation is
// reported and the default used.
func TestConfigMapsAndProjections(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bundle"},
		Data: map[string]string{"ca.crt": string(testCA.CertPEM), "other": "x"}}
	create(t, cm)
	spec := corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:1"}},
		Volumes: []corev1.Volume{{Name: "p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{{ConfigMap: &corev1.ConfigMapProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: "bundle"},
				Items:                []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}},
			}}},
			DefaultMode: ptr.To[int32](0o444),
		}}}},
	}
	create(t, deployment(ns, "app", 0, spec, with(optIn, rollout.AnnotationMinInterval, "soon")))
	c := startController(t, ns, testOptions())
	waitAdopted(t, ns, "app")
	waitEvent(t, ns, "app", eventInvalidAnnotation, `hotcert.dev/min-interval="soon"`)

	cm.Data["other"] = "y"
	if err := env.Client().Update(testContext(t), cm); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the controller to read the unconsumed change", func() (bool, error) {
		return c.digested(rollout.KindConfigMap, "bundle", cm.ResourceVersion), nil
	})
	holds(t, 500*time.Millisecond, "no rollout", func() (bool, error) { return replicaSets(t, ns, "app") == 1, nil })

	cm.Data["ca.crt"] = string(hotcertCA().CertPEM)
	if err := env.Client().Update(testContext(t), cm); err != nil {
		t.Fatal(err)
	}
	waitReplicaSets(t, ns, "app", 2)
	waitEvent(t, ns, "app", eventRolled, "ConfigMap bundle key ca.crt changed")

	// A truncated bundle is refused.
	cm.Data["ca.crt"] = string(testCA.CertPEM[:len(testCA.CertPEM)/2])
	if err := env.Client().Update(testContext(t), cm); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, ns, "app", eventRefused, "ConfigMap "+ns+"/bundle key ca.crt")
	holds(t, 500*time.Millisecond, "no rollout into a truncated bundle", func() (bool, error) { return replicaSets(t, ns, "app") == 2, nil })
}
