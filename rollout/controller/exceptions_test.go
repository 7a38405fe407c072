package controller

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/internal/naming"
)

func annotate(key, value string) func(*corev1.Secret) {
	return func(s *corev1.Secret) {
		if value == "" {
			delete(s.Annotations, key)
			return
		}
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[key] = value
	}
}

// countEvents counts the Events of reason on name whose message holds part.
func countEvents(t *testing.T, ns, name string, reason eventReason, part string) int {
	t.Helper()
	n := 0
	for _, e := range events(t, ns, name, reason) {
		if strings.Contains(e.Message, part) {
			n += int(max(e.Count, 1))
		}
	}
	return n
}

// TestIgnoreKeysAnnotation: hotcert.dev/ignore-keys on a consumed Secret.
// Adding it rolls nothing; each change of an ignored key rolls nothing and is
// said once, in the recorded state and a Normal Event; removing it rolls
// nothing (the key's current content is the new baseline); then a change of
// the key rolls again. Annotations are metadata: the controller sees them in
// both of its watch modes.
func TestIgnoreKeysAnnotation(t *testing.T) {
	t.Parallel()
	for _, mode := range []SecretCache{CacheReferenced, CacheMetadata} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			o := testOptions()
			o.SecretCache = mode
			testIgnoreKeys(t, o)
		})
	}
}

func testIgnoreKeys(t *testing.T, o Options) {
	ns := env.NewNamespace(t)
	createSecret(t, secret(ns, "s", map[string]string{"a": "1", "b": "1"}))
	create(t, deployment(ns, "app", 0, envFrom("s", "a", "b"), optIn))
	waitReplicaSets(t, ns, "app", 1)
	c := startController(t, ns, o)
	waitAdopted(t, ns, "app")
	oneReplicaSet := func(what string) {
		t.Helper()
		holds(t, 500*time.Millisecond, "no rollout after "+what, func() (bool, error) { return replicaSets(t, ns, "app") == 1, nil })
	}

	updateSecret(t, ns, "s", annotate(rollout.AnnotationIgnoreKeys, "b"))
	waitEvent(t, ns, "app", eventIgnored, "Secret s key b ignored from now on")
	oneReplicaSet("adding the annotation")
	if keys := getDeployment(t, ns, "app").Annotations[rollout.AnnotationAppliedKeys]; !strings.Contains(keys, `"Secret/s/b":"`+naming.Ignored) {
		t.Fatalf("the recorded state does not say b is ignored: %s", keys)
	}

	for i, v := range []string{"2", "3"} {
		updateSecret(t, ns, "s", setKey("b", v))
		waitFor(t, "the ignored change to be counted", func() (bool, error) {
			return c.counter("Deployment", resultIgnored, reasonIgnoredKey) == i+1, nil
		})
		oneReplicaSet("a change of an ignored key")
	}
	if n := countEvents(t, ns, "app", eventIgnored, "not rolling: Secret s key b changed, ignored"); n != 2 {
		t.Fatalf("%d Events for two ignored changes", n)
	}
	if n := countEvents(t, ns, "app", eventRolled, ""); n != 0 {
		t.Fatalf("%d Rolled Events", n)
	}

	// Removing the annotation is no change of content.
	updateSecret(t, ns, "s", annotate(rollout.AnnotationIgnoreKeys, ""))
	waitEvent(t, ns, "app", eventIgnored, "Secret s key b counts again")
	oneReplicaSet("removing the annotation")
	d := getDeployment(t, ns, "app")
	if keys := d.Annotations[rollout.AnnotationAppliedKeys]; strings.Contains(keys, naming.Ignored) {
		t.Fatalf("the recorded state still ignores something: %s", keys)
	}
	if n := countEvents(t, ns, "app", eventRebased, ""); n != 0 {
		t.Fatalf("%d BaselineUpdated Events: the annotation's coming and going is reported as something else", n)
	}

	updateSecret(t, ns, "s", setKey("b", "4"))
	waitReplicaSets(t, ns, "app", 2)
	waitEvent(t, ns, "app", eventRolled, "Secret s key b changed")

	// A malformed value is reported and ignores nothing.
	updateSecret(t, ns, "s", func(s *corev1.Secret) {
		annotate(rollout.AnnotationIgnoreKeys, "b/c")(s)
		s.Data["b"] = []byte("5")
	})
	waitEvent(t, ns, "app", eventInvalidAnnotation, `"b/c" is not a key name`)
	waitReplicaSets(t, ns, "app", 3)
}

// TestIgnoreObjectAnnotation: hotcert.dev/ignore on a consumed TLS Secret:
// broken content is neither rolled nor refused while it is ignored; removing
// the annotation in the edit that repairs it rolls the repaired content.
func TestIgnoreObjectAnnotation(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	leaf := issue()
	s := secret(ns, "tls", map[string]string{"tls.crt": string(leaf.ChainPEM), "tls.key": string(leaf.KeyPEM)})
	s.Type = corev1.SecretTypeTLS
	createSecret(t, s)
	create(t, deployment(ns, "app", 0, mountAll("tls"), optIn))
	waitReplicaSets(t, ns, "app", 1)
	c := startController(t, ns, testOptions())
	waitAdopted(t, ns, "app")

	updateSecret(t, ns, "tls", annotate(rollout.AnnotationIgnore, "true"))
	waitEvent(t, ns, "app", eventIgnored, "Secret tls ignored from now on")
	updateSecret(t, ns, "tls", setKey("tls.crt", "not a certificate"))
	waitEvent(t, ns, "app", eventIgnored, "not rolling: Secret tls key tls.crt changed, ignored")
	holds(t, 500*time.Millisecond, "no rollout of ignored content", func() (bool, error) { return replicaSets(t, ns, "app") == 1, nil })
	if n := countEvents(t, ns, "app", eventRefused, ""); n != 0 {
		t.Fatalf("ignored content was refused (%d Events)", n)
	}
	if got := c.counter("Deployment", resultIgnored, reasonIgnoredKey); got != 1 {
		t.Fatalf("ignored counter = %d", got)
	}

	// The annotation removed in the same edit that repairs the content: the
	// content differs from what was last seen of it, so it rolls.
	next := issue()
	updateSecret(t, ns, "tls", func(s *corev1.Secret) {
		annotate(rollout.AnnotationIgnore, "")(s)
		s.Data["tls.crt"], s.Data["tls.key"] = next.ChainPEM, next.KeyPEM
	})
	waitReplicaSets(t, ns, "app", 2)
	waitEvent(t, ns, "app", eventRolled, "Secret tls key tls.crt changed")
}
