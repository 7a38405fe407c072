package v1alpha1_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/hotcert/hotcert/internal/kubetest"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
)

var env *kubetest.Env

func TestMain(m *testing.M) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	kubetest.Main(m, &env, kubetest.WithScheme(s), kubetest.WithCRDPaths("crd"))
}

var (
	modelConfig = v1alpha1.GroupVersionKind{Group: "kagent.dev", Version: "v1alpha2", Kind: "ModelConfig"}
	agent       = v1alpha1.GroupVersionKind{Group: "kagent.dev", Version: "v1alpha2", Kind: "Agent"}
	argoRollout = v1alpha1.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Rollout"}
)

// KagentRules are the two rules of kagent's chain, as in the package doc.
func kagentRules() []v1alpha1.ReferenceRule {
	return []v1alpha1.ReferenceRule{{
		ObjectMeta: metav1.ObjectMeta{Name: "kagent-modelconfig"},
		Spec: v1alpha1.ReferenceRuleSpec{
			Target: modelConfig,
			SecretRefs: []v1alpha1.DataRef{
				{Name: v1alpha1.FieldRef{Path: "spec.apiKeySecret"}, Key: &v1alpha1.FieldRef{Path: "spec.apiKeySecretKey"}},
				{Name: v1alpha1.FieldRef{Path: "spec.tls.caCertSecretRef"}, Key: &v1alpha1.FieldRef{Path: "spec.tls.caCertSecretKey", Default: "ca.crt"}},
			},
			ReferencedBy: []v1alpha1.Referrer{{
				Target: agent,
				Name:   v1alpha1.FieldRef{Path: "spec.declarative.modelConfig", Default: "default-model-config"},
			}},
		},
	}, {
		ObjectMeta: metav1.ObjectMeta{Name: "kagent-agent"},
		Spec: v1alpha1.ReferenceRuleSpec{
			Target:    agent,
			Workloads: &v1alpha1.WorkloadRule{OwnerReferences: &v1alpha1.OwnerReferences{}},
		},
	}}
}

func TestKagentRulesAreAccepted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, r := range kagentRules() {
		r := r
		if err := env.Client().Create(ctx, &r); err != nil {
			t.Fatalf("%s: %v", r.Name, err)
		}
		t.Cleanup(func() { _ = env.Client().Delete(context.Background(), &r) })
		got := &v1alpha1.ReferenceRule{}
		if err := env.Client().Get(ctx, client.ObjectKey{Name: r.Name}, got); err != nil {
			t.Fatal(err)
		}
		if len(got.Spec.ReferencedBy) > 0 && got.Spec.ReferencedBy[0].Format != v1alpha1.FormatName {
			t.Errorf("%s: format defaulted to %q, want Name", r.Name, got.Spec.ReferencedBy[0].Format)
		}
	}
}

// Bad rules are refused by the API server with a message that says what to fix.
func TestInvalidRulesAreRefusedWithClearMessages(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	secretRef := []v1alpha1.DataRef{{Name: v1alpha1.FieldRef{Path: "spec.secret"}}}
	cases := []struct {
		name string
		spec v1alpha1.ReferenceRuleSpec
		want string
	}{
		{"empty", v1alpha1.ReferenceRuleSpec{Target: modelConfig},
			"a ReferenceRule must declare at least one of secretRefs, configMapRefs, referencedBy, workloads or rollout"},
		{"no-name", v1alpha1.ReferenceRuleSpec{Target: modelConfig, SecretRefs: []v1alpha1.DataRef{{}}},
			"spec.secretRefs[0].name: Invalid value: needs a path, a default, or both"},
		{"bad-path", v1alpha1.ReferenceRuleSpec{Target: modelConfig, SecretRefs: []v1alpha1.DataRef{{Name: v1alpha1.FieldRef{Path: ".spec.tls[0].ca"}}}},
			"path must be dot-separated field names, each optionally followed by [] to take every element of a list"},
		{"bad-key", v1alpha1.ReferenceRuleSpec{Target: modelConfig, ConfigMapRefs: []v1alpha1.DataRef{{Name: v1alpha1.FieldRef{Default: "x"}, Key: &v1alpha1.FieldRef{}}}},
			"spec.configMapRefs[0].key: Invalid value: needs a path, a default, or both"},
		{"target-secret", v1alpha1.ReferenceRuleSpec{Target: v1alpha1.GroupVersionKind{Version: "v1", Kind: "Secret"}, SecretRefs: secretRef},
			"target must be a kind that names Secrets or ConfigMaps, not a Secret or ConfigMap itself"},
		{"resource-name", v1alpha1.ReferenceRuleSpec{Target: v1alpha1.GroupVersionKind{Group: "kagent.dev", Version: "v1alpha2", Kind: "modelconfigs"}, SecretRefs: secretRef},
			"kind must be a kind name such as ModelConfig (CamelCase), not a resource name"},
		{"bad-group", v1alpha1.ReferenceRuleSpec{Target: v1alpha1.GroupVersionKind{Group: "Kagent_Dev", Version: "v1alpha2", Kind: "ModelConfig"}, SecretRefs: secretRef},
			"group must be a DNS subdomain such as kagent.dev, or empty for the core API"},
		{"two-workload-rules", v1alpha1.ReferenceRuleSpec{Target: agent, Workloads: &v1alpha1.WorkloadRule{OwnerReferences: &v1alpha1.OwnerReferences{}, Name: "{name}"}},
			"workloads needs exactly one of ownerReferences, selector or name"},
		{"no-workload-rule", v1alpha1.ReferenceRuleSpec{Target: agent, Workloads: &v1alpha1.WorkloadRule{}},
			"workloads needs exactly one of ownerReferences, selector or name"},
		{"bad-workload-kind", v1alpha1.ReferenceRuleSpec{Target: agent, Workloads: &v1alpha1.WorkloadRule{Kinds: []string{"deployments"}, Name: "{name}"}},
			"a workload kind is a kind name such as Deployment or Rollout (CamelCase), not a resource name"},
		{"rollout-without-template", v1alpha1.ReferenceRuleSpec{Target: argoRollout, Rollout: &v1alpha1.RolloutTarget{RestartAt: "spec.restartAt"}},
			`spec.rollout.podTemplate: Invalid value: "": path must be dot-separated field names naming one field`},
		{"rollout-list-path", v1alpha1.ReferenceRuleSpec{Target: argoRollout, Rollout: &v1alpha1.RolloutTarget{PodTemplate: "spec.templates[]"}},
			"path must be dot-separated field names naming one field (no []), e.g. spec.template or spec.jobTemplate.spec.template"},
		{"rollout-bad-restart-path", v1alpha1.ReferenceRuleSpec{Target: argoRollout, Rollout: &v1alpha1.RolloutTarget{PodTemplate: "spec.template", RestartAt: ".spec.restartAt"}},
			"spec.rollout.restartAt: Invalid value"},
		{"rollout-restart-is-template", v1alpha1.ReferenceRuleSpec{Target: argoRollout, Rollout: &v1alpha1.RolloutTarget{PodTemplate: "spec.template", RestartAt: "spec.template"}},
			"restartAt must be a field of its own, not the pod template"},
		{"rollout-of-deployment", v1alpha1.ReferenceRuleSpec{Target: v1alpha1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, Rollout: &v1alpha1.RolloutTarget{PodTemplate: "spec.template"}},
			"rollout declares kinds other than Deployment, StatefulSet and DaemonSet, which are rolled already"},
		{"rollout-long-ready", v1alpha1.ReferenceRuleSpec{Target: argoRollout, Rollout: &v1alpha1.RolloutTarget{PodTemplate: "spec.template", Ready: strings.Repeat("true && ", 300) + "true"}},
			"spec.rollout.ready: Too long"},
		{"self-reference", v1alpha1.ReferenceRuleSpec{Target: agent, ReferencedBy: []v1alpha1.Referrer{{Target: agent, Name: v1alpha1.FieldRef{Path: "spec.parent"}}}},
			"referencedBy must name other kinds than the target itself"},
		{"bad-format", v1alpha1.ReferenceRuleSpec{Target: modelConfig, ReferencedBy: []v1alpha1.Referrer{{Target: agent, Name: v1alpha1.FieldRef{Path: "spec.m"}, Format: "namespace/name"}}},
			`spec.referencedBy[0].format: Unsupported value: "namespace/name": supported values: "Name", "NamespacedName"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &v1alpha1.ReferenceRule{ObjectMeta: metav1.ObjectMeta{Name: "bad-" + c.name}, Spec: c.spec}
			err := env.Client().Create(ctx, r)
			if err == nil {
				t.Fatalf("accepted; want refusal with %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("refused with\n  %v\nwant a message containing\n  %s", err, c.want)
			}
			t.Logf("refused: %v", err)
		})
	}
}

// The example rules shipped (for kagent, and the rollout targets) are
// accepted as written, and read back with every field they set.
func TestExampleRulesAreAccepted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for file, want := range map[string]int{
		"kagent-referencerules/referencerules.yaml": 2,
		"rollout-targets/argo-rollout.yaml":         1,
		"rollout-targets/cronjob.yaml":              1,
	} {
		data, err := os.ReadFile("../../../examples/" + file)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, doc := range strings.Split(string(data), "\n---\n") {
			var r v1alpha1.ReferenceRule
			if err := yaml.UnmarshalStrict([]byte(doc), &r); err != nil {
				t.Fatalf("%s: document %d: %v", file, n, err)
			}
			r.Name = "example-" + r.Name
			if err := env.Client().Create(ctx, &r); err != nil {
				t.Fatalf("%s: %s: %v", file, r.Name, err)
			}
			t.Cleanup(func() { _ = env.Client().Delete(context.Background(), &r) })
			got := &v1alpha1.ReferenceRule{}
			if err := env.Client().Get(ctx, client.ObjectKey{Name: r.Name}, got); err != nil {
				t.Fatal(err)
			}
			if (r.Spec.Rollout == nil) != (got.Spec.Rollout == nil) || (r.Spec.Rollout != nil && *r.Spec.Rollout != *got.Spec.Rollout) {
				t.Errorf("%s: rollout stored as %+v, written %+v", r.Name, got.Spec.Rollout, r.Spec.Rollout)
			}
			n++
		}
		if n != want {
			t.Fatalf("%s: %d rules, want %d", file, n, want)
		}
	}
}
