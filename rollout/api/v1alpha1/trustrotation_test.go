package v1alpha1_test

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
)

const fp2025 = "3f0c5a9d6e7b8c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f60718293a4b5c6d7e8f9"

// fullRotation sets every field of the spec.
func fullRotation(name string) *v1alpha1.TrustRotation {
	return &v1alpha1.TrustRotation{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.TrustRotationSpec{
			OldCA: v1alpha1.CA{Name: "CA-2025", From: &v1alpha1.KeyRef{Kind: "ConfigMap", Namespace: "pki", Name: "ca-2025", Key: "ca.crt"}},
			NewCA: v1alpha1.CA{Name: "CA-2026", PEM: "-----BEGIN CERTIFICATE-----\n…\n-----END CERTIFICATE-----\n"},
			Trust: []v1alpha1.TrustObject{
				{ConfigMap: &v1alpha1.ObjectKey{Namespace: "dexaflow", Name: "agent-ca", Key: "ca.crt"}},
				{Secret: &v1alpha1.ObjectKey{Namespace: "dexaflow", Name: "cp-tls", Key: "ca.crt"}},
				{ClusterTrustBundle: &v1alpha1.ClusterTrustBundleRef{SignerName: "example.com/agents",
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"rotation": "2026"}}}},
				{ClusterTrustBundle: &v1alpha1.ClusterTrustBundleRef{Name: "agents-2026"}},
				{Bundle: &v1alpha1.BundleRef{Name: "cluster-ca"}},
			},
			ServerCertificates: []v1alpha1.ServerCertificate{{Namespace: "dexaflow", Name: "cp-tls", Port: "grpc", ServerName: "cp.dexaflow.svc"},
				{SignerName: "example.com/dexaflow-agents", Port: "grpc"}},
			Evidence: v1alpha1.Evidence{
				Prometheus: &v1alpha1.PrometheusSource{URL: "http://prometheus.monitoring:9090", PodLabel: "pod"},
				Scrape:     &v1alpha1.ScrapeSource{Port: "metrics"},
			},
			Propagation:  v1alpha1.Propagation{Volume: &metav1.Duration{Duration: 3 * time.Minute}},
			Acknowledged: []v1alpha1.Acknowledgement{{Namespace: "legacy", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "jvm"}}, Reason: "checked with keytool"}},
			MinConsumers: 10,
		},
	}
}

// TestTrustRotationIsAccepted: a TrustRotation using every field is
// accepted, defaulted (mode Observe, the server certificate's key tls.crt)
// and read back as written; its status is written through the status
// subresource with one condition per step.
func TestTrustRotationIsAccepted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := fullRotation("ca-2026")
	if err := env.Client().Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client().Delete(context.Background(), r) })
	got := &v1alpha1.TrustRotation{}
	if err := env.Client().Get(ctx, client.ObjectKey{Name: r.Name}, got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Mode != v1alpha1.ModeObserve || got.Spec.ServerCertificates[0].Key != "tls.crt" {
		t.Fatalf("defaults: mode %q, server certificate key %q; want Observe, tls.crt", got.Spec.Mode, got.Spec.ServerCertificates[0].Key)
	}
	want := fullRotation("ca-2026").Spec
	want.Mode, want.ServerCertificates[0].Key, want.ServerCertificates[1].Key = v1alpha1.ModeObserve, "tls.crt", "tls.crt"
	if !reflect.DeepEqual(got.Spec, want) {
		t.Fatalf("read back\n  %+v\nwritten\n  %+v", got.Spec, want)
	}

	now := metav1.NewTime(time.Now().Truncate(time.Second))
	got.Status = v1alpha1.TrustRotationStatus{
		ObservedGeneration: got.Generation,
		Next:               v1alpha1.StepAddNewCA,
		Summary:            "step 1 (add-new-ca) not done",
		Trust:              []v1alpha1.TrustObjectStatus{{Object: "ConfigMap dexaflow/agent-ca key ca.crt", Objects: 1, HoldNew: 1, HoldOld: 1, NewSince: &now}},
		ServerCertificates: []v1alpha1.ServerCertificateStatus{{Secret: "dexaflow/cp-tls", IssuedBy: "new", NewSince: &now},
			{SignerName: "example.com/dexaflow-agents", Pods: 3, HoldNew: 2}},
		Consumers: v1alpha1.ConsumerCounts{Pods: 2, Total: 2, ByEvidence: v1alpha1.EvidenceCounts{Reported: 1, Never: 1}, ByState: v1alpha1.StateCounts{Both: 1, Unknown: 1}},
		Stragglers: []v1alpha1.Straggler{{Namespace: "dexaflow", Pod: "legacy-0", Container: "app", Object: "ConfigMap dexaflow/agent-ca key ca.crt",
			How: "subPath", Evidence: v1alpha1.EvidenceNever, Step: v1alpha1.StepAddNewCA, Reason: "mounts the key with subPath and started before CA-2026 was added: restart it"}},
	}
	for _, step := range []string{v1alpha1.StepAddNewCA, v1alpha1.StepSwitchServerCert, v1alpha1.StepRemoveOldCA} {
		got.Status.Conditions = append(got.Status.Conditions, metav1.Condition{Type: step, Status: metav1.ConditionFalse,
			Reason: v1alpha1.ReasonNotSafe, Message: "…", LastTransitionTime: now, ObservedGeneration: got.Generation})
	}
	if err := env.Client().Status().Update(ctx, got); err != nil {
		t.Fatalf("status update: %v", err)
	}
	back := &v1alpha1.TrustRotation{}
	if err := env.Client().Get(ctx, client.ObjectKey{Name: r.Name}, back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Status, got.Status) {
		t.Fatalf("status read back\n  %+v\nwritten\n  %+v", back.Status, got.Status)
	}
}

// Bad TrustRotations are refused by the API server with a message that says
// what to fix.
func TestInvalidTrustRotationsAreRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cases := []struct {
		name string
		edit func(*v1alpha1.TrustRotationSpec)
		want string
	}{
		{"ca-none", func(s *v1alpha1.TrustRotationSpec) { s.NewCA = v1alpha1.CA{Name: "x"} },
			"spec.newCA: Invalid value: a CA needs exactly one of sha256, pem or from"},
		{"ca-two", func(s *v1alpha1.TrustRotationSpec) { s.OldCA.SHA256 = []string{fp2025} },
			"a CA needs exactly one of sha256, pem or from"},
		{"bad-fingerprint", func(s *v1alpha1.TrustRotationSpec) {
			s.ServerCertificates = nil
			s.OldCA = v1alpha1.CA{SHA256: []string{"3F:0C"}}
		}, "a fingerprint is 64 lower-case hex digits"},
		{"server-needs-certificates", func(s *v1alpha1.TrustRotationSpec) { s.OldCA = v1alpha1.CA{SHA256: []string{fp2025}} },
			"serverCertificates needs both CAs' certificates (pem or from)"},
		{"no-trust", func(s *v1alpha1.TrustRotationSpec) { s.Trust = nil }, "spec.trust: Required value"},
		{"trust-two", func(s *v1alpha1.TrustRotationSpec) { s.Trust[0].Bundle = &v1alpha1.BundleRef{Name: "b"} },
			"a trust object needs exactly one of configMap, secret, clusterTrustBundle or bundle"},
		{"ctb-both", func(s *v1alpha1.TrustRotationSpec) { s.Trust[3].ClusterTrustBundle.SignerName = "example.com/x" },
			"a clusterTrustBundle needs a name or a signerName, not both"},
		{"ctb-selector-alone", func(s *v1alpha1.TrustRotationSpec) {
			s.Trust[3].ClusterTrustBundle.LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
		}, "labelSelector selects among a signer's ClusterTrustBundles: give signerName with it"},
		{"server-secret-and-signer", func(s *v1alpha1.TrustRotationSpec) { s.ServerCertificates[0].SignerName = "example.com/cp" },
			"a server certificate is a Secret (namespace and name) or a signer's pod certificates (signerName), not both"},
		{"server-secret-without-name", func(s *v1alpha1.TrustRotationSpec) { s.ServerCertificates[0].Name = "" },
			"a server certificate Secret needs a namespace and a name"},
		{"bad-kind", func(s *v1alpha1.TrustRotationSpec) { s.OldCA.From.Kind = "configmap" },
			`spec.oldCA.from.kind: Unsupported value: "configmap"`},
		{"bad-mode", func(s *v1alpha1.TrustRotationSpec) { s.Mode = "Steer" }, `spec.mode: Unsupported value: "Steer"`},
		{"bad-url", func(s *v1alpha1.TrustRotationSpec) { s.Evidence.Prometheus.URL = "prometheus:9090" },
			"url must be an http or https URL"},
		{"bad-delay", func(s *v1alpha1.TrustRotationSpec) { s.Propagation.Volume = &metav1.Duration{Duration: -time.Second} },
			"a positive duration such as 2m or 90s"},
		{"ack-without-reason", func(s *v1alpha1.TrustRotationSpec) { s.Acknowledged[0].Reason = "" },
			"spec.acknowledged[0].reason"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := fullRotation("bad-" + c.name)
			c.edit(&r.Spec)
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

// TestTrustRotationDeepCopy: a deep copy shares no memory with the original.
func TestTrustRotationDeepCopy(t *testing.T) {
	r := fullRotation("copy")
	now := metav1.Now()
	r.Status = v1alpha1.TrustRotationStatus{
		Trust:              []v1alpha1.TrustObjectStatus{{Object: "o", NewSince: &now, OldGoneSince: &now}},
		ServerCertificates: []v1alpha1.ServerCertificateStatus{{Secret: "s", NewSince: &now}},
		Stragglers:         []v1alpha1.Straggler{{Pod: "p"}},
		Conditions:         []metav1.Condition{{Type: v1alpha1.StepAddNewCA}},
	}
	before, _ := json.Marshal(r)
	c := r.DeepCopy()
	// Change everything reachable from the copy.
	c.Spec.OldCA.From.Name = "x"
	c.Spec.NewCA.SHA256 = append(c.Spec.NewCA.SHA256, "x")
	c.Spec.Trust[0].ConfigMap.Key = "x"
	c.Spec.Trust[1].Secret.Key = "x"
	c.Spec.Trust[2].ClusterTrustBundle.LabelSelector.MatchLabels["rotation"] = "x"
	c.Spec.Trust[4].Bundle.Name = "x"
	c.Spec.ServerCertificates[0].Port = "x"
	c.Spec.Evidence.Prometheus.URL = "x"
	c.Spec.Evidence.Scrape.Port = "x"
	c.Spec.Propagation.Volume.Duration = 0
	c.Spec.Acknowledged[0].Selector.MatchLabels["app"] = "x"
	c.Status.Trust[0].NewSince.Time = time.Time{}
	c.Status.Trust[0].OldGoneSince.Time = time.Time{}
	c.Status.ServerCertificates[0].NewSince.Time = time.Time{}
	c.Status.Stragglers[0].Pod = "x"
	c.Status.Conditions[0].Type = "x"
	after, _ := json.Marshal(r)
	if string(before) != string(after) {
		t.Fatalf("changing the copy changed the original:\n%s\n%s", before, after)
	}
	l := &v1alpha1.TrustRotationList{Items: []v1alpha1.TrustRotation{*r}}
	lc := l.DeepCopyObject().(*v1alpha1.TrustRotationList)
	lc.Items[0].Spec.Trust[0].ConfigMap.Key = "y"
	if l.Items[0].Spec.Trust[0].ConfigMap.Key != "ca.crt" {
		t.Fatal("changing the list's copy changed the original")
	}
}

// TestTrustRotationJSONShape: the documented field names (docs/census.md).
func TestTrustRotationJSONShape(t *testing.T) {
	r := fullRotation("shape")
	r.Status.Consumers.ByEvidence.Reported = 1
	data, err := yaml.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"oldCA:", "newCA:", "serverCertificates:", "clusterTrustBundle:", "signerName:",
		"labelSelector:", "evidence:", "prometheus:", "propagation:", "acknowledged:", "minConsumers:", "byEvidence:", "byState:"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("no %q in\n%s", want, data)
		}
	}
}

// TestExampleTrustRotationIsAccepted: the shipped example is accepted as
// written.
func TestExampleTrustRotationIsAccepted(t *testing.T) {
	data, err := os.ReadFile("../../../examples/trust-rotation/trustrotation.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var r v1alpha1.TrustRotation
	if err := yaml.UnmarshalStrict(data, &r); err != nil {
		t.Fatal(err)
	}
	r.Name = "example-" + r.Name
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := env.Client().Create(ctx, &r); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client().Delete(context.Background(), &r) })
}
