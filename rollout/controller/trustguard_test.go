package controller

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/rollout"
)

// trustFixture: a server Secret "tls" declared trusted by ConfigMap "ca" key
// ca.crt, a server Deployment consuming the Secret and a client Deployment
// consuming the bundle, both adopted, with leaf and bundle from oldCA.
func trustFixture(t *testing.T) (ns string, oldCA, newCA *hotcerttest.CA, c *running) {
	t.Helper()
	ns = env.NewNamespace(t)
	oldCA, newCA = hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	leaf := oldCA.MustIssue()
	createSecret(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tls",
		Annotations: map[string]string{rollout.AnnotationTrustedBy: "ConfigMap/ca/ca.crt"}},
		Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": leaf.ChainPEM, "tls.key": leaf.KeyPEM}})
	create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ca"},
		Data: map[string]string{"ca.crt": string(oldCA.CertPEM)}})
	create(t, deployment(ns, "server", 0, mountAll("tls"), optIn))
	client := corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:1",
			VolumeMounts: []corev1.VolumeMount{{Name: "ca", MountPath: "/etc/ca"}}}},
		Volumes: []corev1.Volume{{Name: "ca", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "ca"}}}}},
	}
	create(t, deployment(ns, "client", 0, client, optIn))
	o := testOptions()
	o.TrustRecheck = 100 * time.Millisecond
	c = startController(t, ns, o)
	waitAdopted(t, ns, "server")
	waitAdopted(t, ns, "client")
	return ns, oldCA, newCA, c
}

func setBundle(t *testing.T, ns string, pem string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm := &corev1.ConfigMap{}
		if err := env.Client().Get(testContext(t), objectKey(ns, "ca"), cm); err != nil {
			return err
		}
		cm.Data["ca.crt"] = pem
		return env.Client().Update(testContext(t), cm)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func setLeaf(t *testing.T, ns string, leaf *hotcerttest.Leaf) {
	t.Helper()
	updateSecret(t, ns, "tls", func(s *corev1.Secret) { s.Data["tls.crt"], s.Data["tls.key"] = leaf.ChainPEM, leaf.KeyPEM })
}

// TestTrustGuardUntrustedLeafDefersUntilBundleTrustsIt: the server Secret gets
// a leaf from a CA its declared bundle does not trust yet (a one-step CA
// swap): the server is not rolled, a Warning RolloutDeferred Event names the
// Secret and the bundle and untrusted_leaf is counted; once the bundle trusts
// the new CA too, the server rolls, and so does the client (its bundle
// changed, and still trusts the leaf in use).
func TestTrustGuardUntrustedLeafDefersUntilBundleTrustsIt(t *testing.T) {
	t.Parallel()
	ns, oldCA, newCA, c := trustFixture(t)

	setLeaf(t, ns, newCA.MustIssue())
	ev := waitEvent(t, ns, "server", eventDeferred, "is not trusted by ConfigMap "+ns+"/ca key ca.crt")
	if ev.Type != corev1.EventTypeWarning {
		t.Errorf("trust deferral Event type %s", ev.Type)
	}
	for _, want := range []string{"Secret " + ns + "/tls", newCA.Cert.Subject.String()} {
		if !contains(ev.Message, want) {
			t.Errorf("Event %q does not name %q", ev.Message, want)
		}
	}
	if got := c.counter("Deployment", resultDeferred, reasonUntrustedLeaf); got != 1 {
		t.Errorf("deferred/untrusted_leaf counted %d times", got)
	}
	if n := replicaSets(t, ns, "server"); n != 1 {
		t.Fatalf("the server rolled onto an untrusted leaf (%d ReplicaSets)", n)
	}

	setBundle(t, ns, string(oldCA.CertPEM)+string(newCA.CertPEM))
	waitReplicaSets(t, ns, "server", 2)
	waitEvent(t, ns, "server", eventRolled, "Secret tls key tls.crt changed")
	waitReplicaSets(t, ns, "client", 2)
	if got := c.counter("Deployment", resultDeferred, reasonDroppedIssuer); got != 0 {
		t.Errorf("deferred/dropped_issuer counted %d times for a bundle that trusts the leaf", got)
	}
}

// TestTrustGuardDroppedIssuerDefersUntilLeafMoves: the bundle drops the CA
// that issued the server Secret's current leaf: the client is not rolled, a
// Warning Event names both objects and dropped_issuer is counted; once the
// Secret holds a leaf of a CA the bundle keeps, the client rolls (and the
// server too: its new leaf is trusted).
func TestTrustGuardDroppedIssuerDefersUntilLeafMoves(t *testing.T) {
	t.Parallel()
	ns, _, newCA, c := trustFixture(t)

	setBundle(t, ns, string(newCA.CertPEM))
	ev := waitEvent(t, ns, "client", eventDeferred, "is not trusted by ConfigMap "+ns+"/ca key ca.crt")
	if ev.Type != corev1.EventTypeWarning || !contains(ev.Message, "Secret "+ns+"/tls") {
		t.Errorf("trust deferral Event %s %q", ev.Type, ev.Message)
	}
	if got := c.counter("Deployment", resultDeferred, reasonDroppedIssuer); got != 1 {
		t.Errorf("deferred/dropped_issuer counted %d times", got)
	}
	if n := replicaSets(t, ns, "client"); n != 1 {
		t.Fatalf("the client rolled onto a bundle that drops the leaf's issuer (%d ReplicaSets)", n)
	}

	setLeaf(t, ns, newCA.MustIssue())
	waitReplicaSets(t, ns, "client", 2)
	waitEvent(t, ns, "client", eventRolled, "ConfigMap ca key ca.crt changed")
	waitReplicaSets(t, ns, "server", 2)
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func objectKey(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }

func TestParseTrustedBy(t *testing.T) {
	got, err := parseTrustedBy("ConfigMap/ca/ca.crt, Secret/trust/bundle.pem")
	if err != nil || len(got) != 2 || got[0] != (trustRef{rollout.KindConfigMap, "ca", "ca.crt"}) || got[1] != (trustRef{rollout.KindSecret, "trust", "bundle.pem"}) {
		t.Fatalf("got %v, %v", got, err)
	}
	for _, bad := range []string{"", "ConfigMap/ca", "Pod/x/y", "ConfigMap//k", "ConfigMap/ca/ca.crt/x"} {
		if _, err := parseTrustedBy(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
