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
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
)

// drivenRotation is fullRotation in mode Drive, with every drive field set.
func drivenRotation(name string) *v1alpha1.TrustRotation {
	r := fullRotation(name)
	r.Spec.Mode = v1alpha1.ModeDrive
	r.Spec.Drive = &v1alpha1.DriveSpec{
		Bundle:  v1alpha1.DriveBundle{ConfigMap: &v1alpha1.ObjectKey{Namespace: "dexaflow", Name: "agent-ca", Key: "ca.crt"}},
		Reissue: v1alpha1.Reissue{CertManager: &v1alpha1.CertManagerReissue{IssuerRef: v1alpha1.IssuerRef{Name: "ca-2026", Kind: "ClusterIssuer", Group: "cert-manager.io"}}},
		Canary: &v1alpha1.Canary{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "true"}},
			Soak: &metav1.Duration{Duration: 10 * time.Minute}},
		DryRun:         true,
		DeadlineMargin: &metav1.Duration{Duration: 72 * time.Hour},
	}
	return r
}

// TestDrivenTrustRotationIsAccepted: a TrustRotation in mode Drive using
// every drive field is accepted, defaulted (action Run) and read back as
// written; its progress is written through the status subresource.
func TestDrivenTrustRotationIsAccepted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := drivenRotation("driven")
	if err := env.Client().Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client().Delete(context.Background(), r) })
	got := &v1alpha1.TrustRotation{}
	if err := env.Client().Get(ctx, client.ObjectKey{Name: r.Name}, got); err != nil {
		t.Fatal(err)
	}
	want := drivenRotation("driven").Spec
	for i := range want.ServerCertificates {
		want.ServerCertificates[i].Key = "tls.crt" // defaulted
	}
	want.Drive.Action = v1alpha1.ActionRun
	if !reflect.DeepEqual(got.Spec, want) {
		gj, _ := json.Marshal(got.Spec)
		wj, _ := json.Marshal(want)
		t.Fatalf("read back\n  %s\nwritten\n  %s", gj, wj)
	}
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	got.Status.Drive = &v1alpha1.DriveStatus{Phase: v1alpha1.PhaseWaiting, Step: v1alpha1.StepSwitchServerCert, Message: "waiting",
		Steps: []v1alpha1.DriveStepStatus{{Name: v1alpha1.StepAddNewCA, Started: &now, Written: &now, Done: &now},
			{Name: v1alpha1.StepSwitchServerCert, Started: &now, CanaryWritten: &now}},
		Issuers:  []v1alpha1.RecordedIssuer{{Certificate: "dexaflow/cp", IssuerRef: v1alpha1.IssuerRef{Name: "ca-2025"}, Canary: true}},
		Plan:     []string{"write ConfigMap dexaflow/agent-ca key ca.crt"},
		Deadline: &now, ObservedGeneration: got.Generation}
	if err := env.Client().Status().Update(ctx, got); err != nil {
		t.Fatalf("status update: %v", err)
	}
	back := &v1alpha1.TrustRotation{}
	if err := env.Client().Get(ctx, client.ObjectKey{Name: r.Name}, back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Status.Drive, got.Status.Drive) {
		t.Fatalf("drive status read back\n  %+v\nwritten\n  %+v", back.Status.Drive, got.Status.Drive)
	}
}

// TestDrivenBundleObjectsAreAccepted: a trust-manager Bundle and a
// ClusterTrustBundle (by name, or with a signer that spec.trust selects)
// are accepted as the drive's bundle, with the failure threshold, and read
// back as written.
func TestDrivenBundleObjectsAreAccepted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for name, b := range map[string]v1alpha1.DriveBundle{
		"trust-manager": {Bundle: &v1alpha1.DriveTrustManagerBundle{Name: "cluster-ca", TrustNamespace: "trust"}},
		"ctb-name":      {ClusterTrustBundle: &v1alpha1.DriveClusterTrustBundle{Name: "agents-2026"}},
		"ctb-signer":    {ClusterTrustBundle: &v1alpha1.DriveClusterTrustBundle{Name: "example.com:agents:2026", SignerName: "example.com/agents"}},
	} {
		t.Run(name, func(t *testing.T) {
			r := drivenRotation("drive-" + name)
			r.Spec.Drive.Bundle = b
			r.Spec.Drive.HandshakeFailureThreshold = ptr.To[int32](5)
			if err := env.Client().Create(ctx, r); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = env.Client().Delete(context.Background(), r) })
			got := &v1alpha1.TrustRotation{}
			if err := env.Client().Get(ctx, client.ObjectKey{Name: r.Name}, got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Spec.Drive.Bundle, b) || *got.Spec.Drive.HandshakeFailureThreshold != 5 {
				t.Fatalf("read back %+v", got.Spec.Drive)
			}
		})
	}
}

// Bad driven TrustRotations are refused with a message that says what to
// fix.
func TestInvalidDrivenTrustRotationsAreRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cases := []struct {
		name string
		edit func(*v1alpha1.TrustRotationSpec)
		want string
	}{
		{"no-drive", func(s *v1alpha1.TrustRotationSpec) { s.Drive = nil }, "mode Drive needs spec.drive"},
		{"fingerprints", func(s *v1alpha1.TrustRotationSpec) {
			s.ServerCertificates, s.Drive.Reissue, s.Drive.Canary = nil, v1alpha1.Reissue{External: &v1alpha1.ExternalReissue{}}, nil
			s.OldCA = v1alpha1.CA{SHA256: []string{fp2025}}
		}, "drive needs both CAs' certificates (pem or from)"},
		{"bundle-not-followed", func(s *v1alpha1.TrustRotationSpec) { s.Drive.Bundle.ConfigMap.Key = "other.crt" },
			"drive.bundle must also be one of spec.trust"},
		{"bundle-secret-not-followed", func(s *v1alpha1.TrustRotationSpec) {
			s.Drive.Bundle = v1alpha1.DriveBundle{Secret: &v1alpha1.ObjectKey{Namespace: "dexaflow", Name: "agent-ca", Key: "ca.crt"}}
		}, "drive.bundle must also be one of spec.trust"},
		{"bundle-two", func(s *v1alpha1.TrustRotationSpec) {
			s.Drive.Bundle.Secret = &v1alpha1.ObjectKey{Namespace: "dexaflow", Name: "cp-tls", Key: "ca.crt"}
		}, "drive.bundle needs exactly one of configMap, secret, bundle or clusterTrustBundle"},
		{"bundle-and-ctb", func(s *v1alpha1.TrustRotationSpec) {
			s.Drive.Bundle = v1alpha1.DriveBundle{Bundle: &v1alpha1.DriveTrustManagerBundle{Name: "cluster-ca"},
				ClusterTrustBundle: &v1alpha1.DriveClusterTrustBundle{Name: "agents-2026"}}
		}, "drive.bundle needs exactly one of configMap, secret, bundle or clusterTrustBundle"},
		{"trust-manager-bundle-not-followed", func(s *v1alpha1.TrustRotationSpec) {
			s.Drive.Bundle = v1alpha1.DriveBundle{Bundle: &v1alpha1.DriveTrustManagerBundle{Name: "other"}}
		}, "drive.bundle must also be one of spec.trust"},
		{"ctb-not-followed", func(s *v1alpha1.TrustRotationSpec) {
			s.Drive.Bundle = v1alpha1.DriveBundle{ClusterTrustBundle: &v1alpha1.DriveClusterTrustBundle{Name: "other", SignerName: "example.com/other"}}
		}, "drive.bundle must also be one of spec.trust"},
		{"bad-threshold", func(s *v1alpha1.TrustRotationSpec) { s.Drive.HandshakeFailureThreshold = ptr.To[int32](-1) },
			"spec.drive.handshakeFailureThreshold"},
		{"reissue-none", func(s *v1alpha1.TrustRotationSpec) { s.Drive.Reissue, s.Drive.Canary = v1alpha1.Reissue{}, nil },
			"drive.reissue needs exactly one of certManager or external"},
		{"certmanager-without-servers", func(s *v1alpha1.TrustRotationSpec) { s.ServerCertificates = nil },
			"drive.reissue.certManager switches the Certificates of spec.serverCertificates"},
		{"canary-external", func(s *v1alpha1.TrustRotationSpec) {
			s.Drive.Reissue = v1alpha1.Reissue{External: &v1alpha1.ExternalReissue{}}
		},
			"a canary stages the switch of cert-manager Certificates"},
		{"canary-both", func(s *v1alpha1.TrustRotationSpec) { s.Drive.Canary.Percent = 10 }, "a canary needs exactly one of percent or selector"},
		{"canary-all", func(s *v1alpha1.TrustRotationSpec) { s.Drive.Canary = &v1alpha1.Canary{Percent: 100} }, "spec.drive.canary.percent"},
		{"bad-action", func(s *v1alpha1.TrustRotationSpec) { s.Drive.Action = "Stop" }, `spec.drive.action: Unsupported value: "Stop"`},
		{"bad-margin", func(s *v1alpha1.TrustRotationSpec) { s.Drive.DeadlineMargin = &metav1.Duration{Duration: -time.Hour} },
			"a positive duration such as 2m or 90s"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := drivenRotation("bad-drive-" + c.name)
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

// TestDriveDeepCopy: a deep copy of the drive spec and status shares no
// memory with the original.
func TestDriveDeepCopy(t *testing.T) {
	r := drivenRotation("copy")
	now := metav1.Now()
	r.Status.Drive = &v1alpha1.DriveStatus{Steps: []v1alpha1.DriveStepStatus{{Name: "a", Started: &now, CanaryWritten: &now, CanaryDone: &now, Written: &now, Done: &now}},
		Issuers: []v1alpha1.RecordedIssuer{{Certificate: "c"}}, Plan: []string{"p"}, Deadline: &now, FailuresSince: &now}
	r.Spec.Drive.HandshakeFailureThreshold = ptr.To[int32](3)
	before, _ := json.Marshal(r)
	c := r.DeepCopy()
	c.Spec.Drive.Bundle.ConfigMap.Key = "x"
	c.Spec.Drive.Reissue.CertManager.IssuerRef.Name = "x"
	c.Spec.Drive.Canary.Selector.MatchLabels["canary"] = "x"
	c.Spec.Drive.Canary.Soak.Duration = 0
	c.Spec.Drive.DeadlineMargin.Duration = 0
	*c.Spec.Drive.HandshakeFailureThreshold = 0
	d := c.Status.Drive
	for _, p := range []*metav1.Time{d.Steps[0].Started, d.Steps[0].CanaryWritten, d.Steps[0].CanaryDone, d.Steps[0].Written, d.Steps[0].Done, d.Deadline, d.FailuresSince} {
		p.Time = time.Time{}
	}
	d.Issuers[0].Certificate, d.Plan[0] = "x", "x"
	after, _ := json.Marshal(r)
	if string(before) != string(after) {
		t.Fatalf("changing the copy changed the original:\n%s\n%s", before, after)
	}
}

// TestExampleDrivenTrustRotationIsAccepted: the shipped driven examples
// are accepted as written.
func TestExampleDrivenTrustRotationIsAccepted(t *testing.T) {
	for _, name := range []string{"driven.yaml", "driven-trust-manager.yaml"} {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile("../../../examples/trust-rotation/" + name)
			if err != nil {
				t.Fatal(err)
			}
			var r v1alpha1.TrustRotation
			if err := yaml.UnmarshalStrict(data, &r); err != nil {
				t.Fatal(err)
			}
			if r.Spec.Mode != v1alpha1.ModeDrive || r.Spec.Drive == nil || !r.Spec.Drive.DryRun {
				t.Fatalf("the example is not a driven dry run: %+v", r.Spec)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := env.Client().Create(ctx, &r); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = env.Client().Delete(context.Background(), &r) })
		})
	}
}
