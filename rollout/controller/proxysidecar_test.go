package controller

import (
	"os"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/kubetest"
	"github.com/hotcert/hotcert/rollout"
)

// examples/proxy-sidecar, applied to the API server as shipped: the proxy runs as
// a native sidecar (an init container with restartPolicy Always, kept by the API
// server), the Deployment is opted in for its ConfigMap, and the Secret the proxy
// follows carries the annotation certificate.yaml's secretTemplate gives it. A
// certificate rotation rolls nothing (the proxy reloads it in place); a change of
// the ConfigMap, which the app reads at start, rolls the pods.
func TestProxySidecarExampleIsNotRolledOnRotation(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	ctx := testContext(t)
	read := func(name string) []*unstructured.Unstructured {
		data, err := os.ReadFile("../../examples/proxy-sidecar/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return kubetest.DecodeYAML(t, data)
	}
	cert := read("certificate.yaml")[0]
	secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	annotations, _, _ := unstructured.NestedStringMap(cert.Object, "spec", "secretTemplate", "annotations")
	if annotations[rollout.AnnotationIgnore] != "true" {
		t.Fatalf("certificate.yaml does not put %s on the Secret: %v", rollout.AnnotationIgnore, annotations)
	}
	ca := hotcerttest.MustNewCA()
	leaf := ca.MustIssue()
	s := secret(ns, secretName, map[string]string{"tls.crt": string(leaf.ChainPEM), "tls.key": string(leaf.KeyPEM), "ca.crt": string(ca.CertPEM)})
	s.Type = corev1.SecretTypeTLS
	s.Annotations = annotations
	createSecret(t, s)
	for _, o := range read("deployment.yaml") {
		o.SetNamespace(ns)
		if o.GetKind() == "Deployment" {
			// No node runs pods here: with none to wait for, a rollout is done at once.
			if err := unstructured.SetNestedField(o.Object, int64(0), "spec", "replicas"); err != nil {
				t.Fatal(err)
			}
		}
		if err := env.Client().Create(ctx, o); err != nil {
			t.Fatalf("the API server refuses %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	d := &appsv1.Deployment{}
	if err := env.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop-api"}, d); err != nil {
		t.Fatal(err)
	}
	if ic := d.Spec.Template.Spec.InitContainers; len(ic) != 1 || ic[0].RestartPolicy == nil || *ic[0].RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Fatalf("the proxy is not a native sidecar as stored: %+v", ic)
	}
	waitReplicaSets(t, ns, "shop-api", 1)
	startController(t, ns, testOptions())
	waitAdopted(t, ns, "shop-api")

	next := ca.MustIssue()
	updateSecret(t, ns, secretName, func(s *corev1.Secret) { s.Data["tls.crt"], s.Data["tls.key"] = next.ChainPEM, next.KeyPEM })
	waitEvent(t, ns, "shop-api", eventIgnored, "Secret "+secretName+" key tls.crt changed, ignored")
	holds(t, 500*time.Millisecond, "no rollout on a certificate rotation", func() (bool, error) { return replicaSets(t, ns, "shop-api") == 1, nil })

	cm := &corev1.ConfigMap{}
	if err := env.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop-api-config"}, cm); err != nil {
		t.Fatal(err)
	}
	cm.Data["app.conf"] = "greeting = hi\n"
	if err := env.Client().Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	waitReplicaSets(t, ns, "shop-api", 2)
}
