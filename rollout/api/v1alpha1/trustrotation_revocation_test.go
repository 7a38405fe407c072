package v1alpha1_test

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
)

// revokingRotation is fullRotation with every revocation field set.
func revokingRotation(name string) *v1alpha1.TrustRotation {
	r := fullRotation(name)
	r.Spec.Revocation = &v1alpha1.RevocationSpec{
		Serials: []v1alpha1.RevokedSerial{{Serial: "4A:1F:09:C3", Issuer: fp2025},
			{Serial: "0badc0de", Issuer: strings.ToUpper(colons(fp2025))}},
		SPKI: []string{fp2025},
		DenyLists: []v1alpha1.DenyListObject{
			{ConfigMap: &v1alpha1.DenyListKeys{Namespace: "dexaflow", Name: "revoked"}},
			{Secret: &v1alpha1.DenyListKeys{Namespace: "edge", Name: "revoked", DenyListKey: "deny.list", CRLKey: "agents.crl"}},
		},
	}
	return r
}

// colons writes a hex fingerprint as openssl does, pairs joined by colons.
func colons(hex string) string {
	var b strings.Builder
	for i := 0; i < len(hex); i += 2 {
		if i > 0 {
			b.WriteByte(':')
		}
		b.WriteString(hex[i : i+2])
	}
	return b.String()
}

// TestRevokingTrustRotationIsAccepted: spec.revocation is accepted and read
// back as written; status.revocation and the RevocationEnforced condition are
// written through the status subresource.
func TestRevokingTrustRotationIsAccepted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := revokingRotation("revoking")
	if err := env.Client().Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client().Delete(context.Background(), r) })
	got := &v1alpha1.TrustRotation{}
	if err := env.Client().Get(ctx, client.ObjectKey{Name: r.Name}, got); err != nil {
		t.Fatal(err)
	}
	if want := revokingRotation("revoking").Spec.Revocation; !reflect.DeepEqual(got.Spec.Revocation, want) {
		gj, _ := json.Marshal(got.Spec.Revocation)
		wj, _ := json.Marshal(want)
		t.Fatalf("read back\n  %s\nwritten\n  %s", gj, wj)
	}
	got.Status.Revocation = &v1alpha1.RevocationStatus{Summary: "s",
		Entries:   []v1alpha1.RevocationEntryStatus{{Entry: "serial 4A:1F:09:C3 issuer " + fp2025, Listed: true}},
		DenyLists: []v1alpha1.DenyListObjectStatus{{Object: "ConfigMap dexaflow/revoked", Version: "0123456789abcdef", RevokesAll: true}},
		Versions:  []string{"0123456789abcdef"},
		Consumers: v1alpha1.RevocationCounts{Pods: 2, Total: 2, ByEvidence: v1alpha1.RevocationEvidenceCounts{Reported: 1, Unknown: 1},
			ByState: v1alpha1.RevocationStateCounts{Refused: 1}},
		Stragglers: []v1alpha1.Straggler{{Namespace: "dexaflow", Pod: "nginx", Evidence: v1alpha1.EvidenceUnknown, Step: v1alpha1.ConditionRevocationEnforced, Reason: "reports no deny list"}},
	}
	got.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionRevocationEnforced, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonUnproven,
		Message: "m", LastTransitionTime: metav1.NewTime(time.Now().Truncate(time.Second))}}
	if err := env.Client().Status().Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	back := &v1alpha1.TrustRotation{}
	if err := env.Client().Get(ctx, client.ObjectKey{Name: r.Name}, back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Status.Revocation, got.Status.Revocation) {
		t.Fatalf("status read back %+v, written %+v", back.Status.Revocation, got.Status.Revocation)
	}
}

// TestInvalidRevocationsAreRefused: each rule of spec.revocation refuses
// with its message.
func TestInvalidRevocationsAreRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cases := []struct {
		name string
		edit func(*v1alpha1.RevocationSpec)
		want string
	}{
		{"no-entry", func(s *v1alpha1.RevocationSpec) { s.Serials, s.SPKI = nil, nil }, "revocation needs at least one serial or spki entry"},
		{"no-deny-list", func(s *v1alpha1.RevocationSpec) { s.DenyLists = nil }, "spec.revocation.denyLists: Required value"},
		{"bad-serial", func(s *v1alpha1.RevocationSpec) { s.Serials[0].Serial = "serial=4A1F" }, "a serial is hex, as openssl x509 -serial prints it"},
		{"no-issuer", func(s *v1alpha1.RevocationSpec) { s.Serials[0].Issuer = "" }, "a SHA-256 is 64 hex digits"},
		{"bad-spki", func(s *v1alpha1.RevocationSpec) { s.SPKI[0] = "2c26" }, "a SHA-256 is 64 hex digits"},
		{"deny-list-both", func(s *v1alpha1.RevocationSpec) {
			s.DenyLists[0].Secret = &v1alpha1.DenyListKeys{Namespace: "a", Name: "b"}
		}, "a deny-list object needs exactly one of configMap or secret"},
		{"deny-list-none", func(s *v1alpha1.RevocationSpec) { s.DenyLists[0].ConfigMap = nil },
			"a deny-list object needs exactly one of configMap or secret"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := revokingRotation("bad-rev-" + c.name)
			c.edit(r.Spec.Revocation)
			err := env.Client().Create(ctx, r)
			if err == nil {
				_ = env.Client().Delete(ctx, r)
				t.Fatalf("accepted; want refusal with %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("refused with\n  %v\nwant a message containing\n  %s", err, c.want)
			}
		})
	}
}

// TestRevocationDeepCopy: a deep copy of the revocation's spec and status
// shares no memory with the original.
func TestRevocationDeepCopy(t *testing.T) {
	r := revokingRotation("copy")
	r.Status.Revocation = &v1alpha1.RevocationStatus{Entries: []v1alpha1.RevocationEntryStatus{{Entry: "e"}},
		DenyLists: []v1alpha1.DenyListObjectStatus{{Object: "o"}}, Versions: []string{"v"}, Stragglers: []v1alpha1.Straggler{{Pod: "p"}}}
	before, _ := json.Marshal(r)
	c := r.DeepCopy()
	c.Spec.Revocation.Serials[0].Serial = "x"
	c.Spec.Revocation.SPKI[0] = "x"
	c.Spec.Revocation.DenyLists[0].ConfigMap.Name = "x"
	c.Spec.Revocation.DenyLists[1].Secret.CRLKey = "x"
	c.Status.Revocation.Entries[0].Entry = "x"
	c.Status.Revocation.DenyLists[0].Object = "x"
	c.Status.Revocation.Versions[0] = "x"
	c.Status.Revocation.Stragglers[0].Pod = "x"
	if after, _ := json.Marshal(r); string(before) != string(after) {
		t.Fatalf("changing the copy changed the original:\n%s\n%s", before, after)
	}
}

// TestDocsRevocationExampleIsAccepted: the TrustRotation with spec.revocation
// that docs/census.md shows is accepted as written.
func TestDocsRevocationExampleIsAccepted(t *testing.T) {
	raw, err := os.ReadFile("../../../docs/census.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```yaml\n(apiVersion: hotcert.dev/v1alpha1\nkind: TrustRotation\n.*?revocation:.*?)```").FindSubmatch(raw)
	if m == nil {
		t.Fatal("docs/census.md shows no TrustRotation with spec.revocation")
	}
	var r v1alpha1.TrustRotation
	if err := yaml.UnmarshalStrict(m[1], &r); err != nil {
		t.Fatal(err)
	}
	if r.Spec.Revocation == nil || len(r.Spec.Revocation.Serials) != 1 || len(r.Spec.Revocation.SPKI) != 1 {
		t.Fatalf("the example's revocation: %+v", r.Spec.Revocation)
	}
	r.Name = "docs-" + r.Name
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := env.Client().Create(ctx, &r); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client().Delete(context.Background(), &r) })
}
