package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/rollout"
)

// TestNotYetValidRenewalRollsAtNotBefore: a correct renewal whose NotBefore is
// a few seconds ahead (an issuer clock ahead, a certificate staged early) is
// not rolled onto while the pods' reloaders would refuse it (no clock-skew
// tolerance) and is not refused either: the change is deferred with an Event
// that says it waits for NotBefore, and the workload rolls, by itself, once
// NotBefore has passed.
func TestNotYetValidRenewalRollsAtNotBefore(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	current := issue()
	createSecret(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": current.ChainPEM, "tls.key": current.KeyPEM}})
	create(t, deployment(ns, "app", 0, mountAll("tls"), optIn))
	c := startController(t, ns, testOptions())
	waitAdopted(t, ns, "app")

	notBefore := time.Now().Add(3 * time.Second).Truncate(time.Second)
	renewal := testCA.MustIssue(hotcerttest.WithValidity(notBefore, notBefore.Add(24*time.Hour)))
	updateSecret(t, ns, "tls", func(s *corev1.Secret) { s.Data["tls.crt"], s.Data["tls.key"] = renewal.ChainPEM, renewal.KeyPEM })

	ev := waitEvent(t, ns, "app", eventDeferred, "waiting for the certificate's NotBefore, rolling at "+notBefore.UTC().Format(time.RFC3339))
	if ev.Type != corev1.EventTypeNormal {
		t.Errorf("deferral Event type %s", ev.Type)
	}
	if got := c.counter("Deployment", resultDeferred, reason(rollout.ReasonNotYetValid)); got != 1 {
		t.Errorf("deferred/not_yet_valid counted %d times", got)
	}
	if len(events(t, ns, "app", eventRefused)) != 0 {
		t.Error("a correct renewal that is not valid yet was refused")
	}
	holds(t, time.Until(notBefore)-300*time.Millisecond, "no rollout before NotBefore", func() (bool, error) {
		return replicaSets(t, ns, "app") == 1, nil
	})
	waitReplicaSets(t, ns, "app", 2)
	waitEvent(t, ns, "app", eventRolled, "Secret tls key tls.crt changed")
	if last := parseTime(t, getDeployment(t, ns, "app").Annotations[rollout.AnnotationLastRollout]); last.Before(notBefore) {
		t.Errorf("rolled at %s, before the certificate's NotBefore %s", last, notBefore)
	}
}
