package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/rollout"
)

// TestTrustGuardListsNoSecrets: the trust guard reads the namespace's
// hotcert.dev/trusted-by declarations from the controller's watch, so a
// rollout sends no list of the namespace's Secrets (a list per rollout made
// the update→patch latency grow with the number of Secrets).
func TestTrustGuardListsNoSecrets(t *testing.T) {
	t.Parallel()
	for _, mode := range []SecretCache{CacheReferenced, CacheMetadata} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			ns := env.NewNamespace(t)
			ca := hotcerttest.MustNewCA()
			leaf := ca.MustIssue()
			createSecret(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tls",
				Annotations: map[string]string{rollout.AnnotationTrustedBy: "ConfigMap/ca/ca.crt"}},
				Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": leaf.ChainPEM, "tls.key": leaf.KeyPEM}})
			create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ca"},
				Data: map[string]string{"ca.crt": string(ca.CertPEM)}})
			create(t, deployment(ns, "server", 0, mountAll("tls"), optIn))
			var log requestLog
			o := testOptions()
			o.SecretCache = mode
			startControllerIn(t, log.config(), []string{ns}, o)
			waitAdopted(t, ns, "server")
			mark := log.len()
			before := podTemplate(t, ns, "server")
			renewed := ca.MustIssue()
			updateSecret(t, ns, "tls", func(s *corev1.Secret) {
				s.Data["tls.crt"], s.Data["tls.key"] = renewed.ChainPEM, renewed.KeyPEM
			})
			waitFor(t, "server to roll onto a leaf its bundle trusts", func() (bool, error) { return podTemplate(t, ns, "server") != before, nil })
			for _, r := range log.since(mark) {
				if r.resource == "secrets" && r.verb == "LIST" {
					t.Errorf("a rollout listed the Secrets of %s (label selector %q)", r.namespace, r.selector)
				}
			}
		})
	}
}
