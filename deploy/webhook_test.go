package deploy

import (
	"encoding/pem"
	"net"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// checkWebhook checks that the webhook's objects fit together: the Deployment
// serves the webhook, with the certificate of the Secret it mounts, on a port
// the Service reaches; the MutatingWebhookConfiguration calls that Service as
// the webhook must be called; with cert-manager, the Certificate is for the
// Service's names, fills that Secret and the caBundle; without, the caBundle is
// given.
func checkWebhook(t *testing.T, objs []*unstructured.Unstructured, certManager bool) {
	t.Helper()
	dep := convert[appsv1.Deployment](t, find(objs, "Deployment", ""))
	o := containerArgs(t, dep)
	if !o.WebhookEnabled() {
		t.Fatalf("the Deployment does not serve the webhook: %v", dep.Spec.Template.Spec.Containers[0].Args)
	}
	pod := dep.Spec.Template.Spec
	_, port, err := net.SplitHostPort(o.WebhookAddr)
	if err != nil {
		t.Fatalf("--webhook-bind-address %q: %v", o.WebhookAddr, err)
	}
	i := slices.IndexFunc(pod.Containers[0].Ports, func(p corev1.ContainerPort) bool { return strconv.Itoa(int(p.ContainerPort)) == port })
	if i < 0 {
		t.Fatalf("no container port %s", port)
	}
	containerPort := pod.Containers[0].Ports[i]

	// The certificate and key: tls.crt and tls.key of a Secret mounted as a
	// folder (a subPath mount would never see a renewal).
	dir := filepath.Dir(o.WebhookCertFile)
	if filepath.Base(o.WebhookCertFile) != "tls.crt" || o.WebhookKeyFile != filepath.Join(dir, "tls.key") {
		t.Errorf("--webhook-cert-file %s, --webhook-key-file %s: want tls.crt and tls.key of one folder", o.WebhookCertFile, o.WebhookKeyFile)
	}
	i = slices.IndexFunc(pod.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == dir })
	if i < 0 || pod.Containers[0].VolumeMounts[i].SubPath != "" {
		t.Fatalf("%s is not a volume mounted as a folder: %v", dir, pod.Containers[0].VolumeMounts)
	}
	mount := pod.Containers[0].VolumeMounts[i]
	i = slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == mount.Name })
	if i < 0 || pod.Volumes[i].Secret == nil {
		t.Fatalf("volume %s is not a Secret", mount.Name)
	}
	secretName := pod.Volumes[i].Secret.SecretName

	mwc := convert[admissionregistrationv1.MutatingWebhookConfiguration](t, find(objs, "MutatingWebhookConfiguration", ""))
	if len(mwc.Webhooks) != 1 {
		t.Fatalf("%d webhooks, want 1", len(mwc.Webhooks))
	}
	w := mwc.Webhooks[0]
	if ptr.Deref(w.FailurePolicy, "") != admissionregistrationv1.Ignore {
		t.Errorf("failurePolicy %v, want Ignore: the webhook must never block a write", ptr.Deref(w.FailurePolicy, ""))
	}
	if ptr.Deref(w.SideEffects, "") != admissionregistrationv1.SideEffectClassNone || !slices.Equal(w.AdmissionReviewVersions, []string{"v1"}) || ptr.Deref(w.TimeoutSeconds, 0) != 5 {
		t.Errorf("sideEffects %v, admissionReviewVersions %v, timeoutSeconds %v: want None, [v1], 5", ptr.Deref(w.SideEffects, ""), w.AdmissionReviewVersions, ptr.Deref(w.TimeoutSeconds, 0))
	}
	want := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
		Rule: admissionregistrationv1.Rule{
			APIGroups: []string{"apps"}, APIVersions: []string{"v1"},
			Resources: []string{"deployments", "statefulsets", "daemonsets"},
			Scope:     ptr.To(admissionregistrationv1.NamespacedScope),
		},
	}}
	if !reflect.DeepEqual(w.Rules, want) {
		t.Errorf("rules %+v, want %+v", w.Rules, want)
	}
	nsSel, err := metav1.LabelSelectorAsSelector(w.NamespaceSelector)
	if err != nil {
		t.Fatal(err)
	}
	if nsSel.Matches(labels.Set{corev1.LabelMetadataName: "kube-system"}) || !nsSel.Matches(labels.Set{corev1.LabelMetadataName: "agents"}) {
		t.Errorf("namespaceSelector %s: want every namespace but kube-system", nsSel)
	}

	ref := w.ClientConfig.Service
	if ref == nil || ptr.Deref(ref.Path, "") != "/mutate" {
		t.Fatalf("clientConfig %+v: want a Service, path /mutate", w.ClientConfig)
	}
	svc := convert[corev1.Service](t, find(objs, "Service", ref.Name))
	if svc.Namespace != ref.Namespace || svc.Namespace != dep.Namespace {
		t.Errorf("Service %s/%s, called as %s/%s, Deployment in %s", svc.Namespace, svc.Name, ref.Namespace, ref.Name, dep.Namespace)
	}
	i = slices.IndexFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == ptr.Deref(ref.Port, 443) })
	if i < 0 {
		t.Fatalf("Service %s has no port %d", svc.Name, ptr.Deref(ref.Port, 443))
	}
	if tp := svc.Spec.Ports[i].TargetPort; tp != intstr.FromString(containerPort.Name) && tp != intstr.FromInt32(containerPort.ContainerPort) {
		t.Errorf("Service %s targets port %s, the webhook's is %s (%d)", svc.Name, tp.String(), containerPort.Name, containerPort.ContainerPort)
	}
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(dep.Spec.Template.Labels)) || len(svc.Spec.Selector) == 0 {
		t.Errorf("Service selector %v does not select the controller's pods %v", svc.Spec.Selector, dep.Spec.Template.Labels)
	}

	cert := find(objs, "Certificate", "")
	if !certManager {
		if cert != nil || find(objs, "Issuer", "") != nil || mwc.Annotations["cert-manager.io/inject-ca-from"] != "" {
			t.Error("cert-manager objects without cert-manager")
		}
		if b, _ := pem.Decode(w.ClientConfig.CABundle); b == nil || b.Type != "CERTIFICATE" {
			t.Errorf("caBundle %q is not PEM", w.ClientConfig.CABundle)
		}
		return
	}
	if cert == nil || !isCertManager(cert) || cert.GetNamespace() != svc.Namespace {
		t.Fatalf("no cert-manager Certificate in %s", svc.Namespace)
	}
	host := svc.Name + "." + svc.Namespace + ".svc"
	dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	if !slices.Contains(dnsNames, host) || slices.ContainsFunc(dnsNames, func(n string) bool { return n != host && n != host+".cluster.local" }) {
		t.Errorf("Certificate dnsNames %v, want %s (and %s.cluster.local)", dnsNames, host, host)
	}
	if got, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName"); got != secretName {
		t.Errorf("Certificate writes Secret %q, the pod mounts %q", got, secretName)
	}
	issuer, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "name")
	if kind, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "kind"); kind != "Issuer" || find(objs, "Issuer", issuer) == nil {
		t.Errorf("Certificate issuer %s %q is not among the objects", kind, issuer)
	}
	// The objects themselves are validated by the API server against
	// cert-manager's CRDs (dryRunCreate, strict field validation).
	if got, want := mwc.Annotations["cert-manager.io/inject-ca-from"], cert.GetNamespace()+"/"+cert.GetName(); got != want {
		t.Errorf("cert-manager.io/inject-ca-from %q, want %q", got, want)
	}
	if len(w.ClientConfig.CABundle) != 0 {
		t.Error("a caBundle, which cert-manager injects")
	}
}

// isCertManager says whether o is a cert-manager object (Issuer, Certificate).
func isCertManager(o *unstructured.Unstructured) bool {
	return o.GroupVersionKind().Group == "cert-manager.io"
}
