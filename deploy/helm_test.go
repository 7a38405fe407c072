package deploy

import (
	"encoding/base64"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hotcert/hotcert/cmd/hotcert-controller/app/options"
	"github.com/hotcert/hotcert/hotcerttest"
)

// TestHelmChart renders the chart with Helm (after `helm lint`), checks that its RBAC is the kustomize RBAC, that the controller
// accepts its arguments, and that the API server accepts every object
// (server-side dry run), the CRD of crds/ included.
func TestHelmChart(t *testing.T) {
	ctx := testContext(t)
	ns := env.NewNamespace(t)
	base := kustomize(t, "base")
	wantRules, wantAggregated := clusterRoles(t, base)
	for _, tc := range []struct {
		name   string
		values map[string]any
		check  func(t *testing.T, objs []*unstructured.Unstructured, o *options.Options)
	}{
		{"defaults", nil, func(t *testing.T, objs []*unstructured.Unstructured, o *options.Options) {
			if find(objs, "PodDisruptionBudget", "") == nil || find(objs, "Service", "") == nil {
				t.Error("missing PodDisruptionBudget or Service")
			}
			if !o.ReferenceRules || o.WebhookEnabled() || find(objs, "MutatingWebhookConfiguration", "") != nil {
				t.Errorf("reference rules %v, webhook %q: want on, off", o.ReferenceRules, o.WebhookAddr)
			}
			if o.Census || find(objs, "ClusterRole", "hotcert-hotcert-controller-census") != nil {
				t.Errorf("census %v, or its ClusterRole, without census.enabled", o.Census)
			}
		}},
		{"census", map[string]any{
			"census": map[string]any{"enabled": true, "interval": "30s"},
		}, func(t *testing.T, objs []*unstructured.Unstructured, o *options.Options) {
			if !o.Census || o.CensusInterval != 30*time.Second || o.CensusPrometheus != (options.Prometheus{}) {
				t.Errorf("census %v every %s, Prometheus %+v; want on every 30s, no credentials", o.Census, o.CensusInterval, o.CensusPrometheus)
			}
			want := convert[rbacv1.ClusterRole](t, find(kustomize(t, "components/census"), "ClusterRole", "hotcert-controller-census"))
			got := convert[rbacv1.ClusterRole](t, find(objs, "ClusterRole", "hotcert-hotcert-controller-census"))
			if !reflect.DeepEqual(got.Rules, want.Rules) {
				t.Errorf("chart census ClusterRole rules %v differ from kustomize's %v", got.Rules, want.Rules)
			}
			if o.CensusDrive || find(objs, "ClusterRole", "hotcert-hotcert-controller-census-drive") != nil {
				t.Errorf("census drive %v, or its ClusterRole, without census.drive.enabled", o.CensusDrive)
			}
		}},
		{"census drive", map[string]any{
			"census": map[string]any{"enabled": true, "drive": map[string]any{"enabled": true}},
		}, func(t *testing.T, objs []*unstructured.Unstructured, o *options.Options) {
			if !o.Census || !o.CensusDrive {
				t.Errorf("census %v, drive %v; want both", o.Census, o.CensusDrive)
			}
			want := convert[rbacv1.ClusterRole](t, find(kustomize(t, "components/census-drive"), "ClusterRole", "hotcert-controller-census-drive"))
			got := convert[rbacv1.ClusterRole](t, find(objs, "ClusterRole", "hotcert-hotcert-controller-census-drive"))
			if !reflect.DeepEqual(got.Rules, want.Rules) {
				t.Errorf("chart census-drive ClusterRole rules %v differ from kustomize's %v", got.Rules, want.Rules)
			}
			if find(objs, "ClusterRoleBinding", "hotcert-hotcert-controller-census-drive") == nil {
				t.Error("no ClusterRoleBinding of the census-drive ClusterRole")
			}
		}},
		{"census drive with Secret bundles and a signer", map[string]any{
			"census": map[string]any{"enabled": true, "drive": map[string]any{"enabled": true, "secretNames": []any{"agent-ca"}, "signerNames": []any{"example.com/agents"}}},
		}, func(t *testing.T, objs []*unstructured.Unstructured, o *options.Options) {
			base := convert[rbacv1.ClusterRole](t, find(kustomize(t, "components/census-drive"), "ClusterRole", "hotcert-controller-census-drive"))
			want := append(base.Rules,
				rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"update"}, ResourceNames: []string{"agent-ca"}},
				rbacv1.PolicyRule{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"signers"}, Verbs: []string{"attest"}, ResourceNames: []string{"example.com/agents"}})
			got := convert[rbacv1.ClusterRole](t, find(objs, "ClusterRole", "hotcert-hotcert-controller-census-drive"))
			if !reflect.DeepEqual(got.Rules, want) {
				t.Errorf("chart census-drive ClusterRole rules\n  %v\nwant\n  %v", got.Rules, want)
			}
		}},
		{"census drive without the census", map[string]any{
			"census": map[string]any{"drive": map[string]any{"enabled": true}},
		}, func(t *testing.T, objs []*unstructured.Unstructured, o *options.Options) {
			if o.CensusDrive || find(objs, "ClusterRole", "hotcert-hotcert-controller-census-drive") != nil {
				t.Errorf("census drive %v, or its ClusterRole, without census.enabled", o.CensusDrive)
			}
		}},
		{"dry run, namespaces, hash key, one replica, no reference rules", map[string]any{
			"replicaCount": 1,
			"controller":   map[string]any{"dryRun": true, "namespaces": []any{"team-a", "team-b"}, "hashKeySecret": "hotcert-hash-key", "referenceRules": false},
		}, func(t *testing.T, objs []*unstructured.Unstructured, o *options.Options) {
			if !o.DryRun || !reflect.DeepEqual(o.Namespaces, []string{"team-a", "team-b"}) || o.HashKeyFile == "" || o.ReferenceRules {
				t.Errorf("values not passed: %+v", o)
			}
			if find(objs, "PodDisruptionBudget", "") != nil {
				t.Error("a PodDisruptionBudget for one replica")
			}
		}},
		{"namespace and workload selectors", map[string]any{
			"controller": map[string]any{"namespaceSelector": "team in (payments,billing)", "workloadSelector": "app.kubernetes.io/part-of=shop"},
		}, func(t *testing.T, _ []*unstructured.Unstructured, o *options.Options) {
			if o.NamespaceSelectorString != "team in (payments,billing)" || o.WorkloadSelectorString != "app.kubernetes.io/part-of=shop" {
				t.Errorf("selectors not passed: namespace %q, workload %q", o.NamespaceSelectorString, o.WorkloadSelectorString)
			}
		}},
		{"census with a Prometheus behind kube-rbac-proxy", map[string]any{
			"census": map[string]any{"enabled": true, "prometheus": map[string]any{
				"url":             "https://prometheus-k8s.monitoring.svc:9091",
				"bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
				"caFile":          "/etc/hotcert/census-prometheus/ca.crt",
				"secretName":      "monitoring-ca",
			}},
		}, func(t *testing.T, objs []*unstructured.Unstructured, o *options.Options) {
			want := options.Prometheus{URL: "https://prometheus-k8s.monitoring.svc:9091", BearerTokenFile: "/var/run/secrets/kubernetes.io/serviceaccount/token",
				CAFile: "/etc/hotcert/census-prometheus/ca.crt"}
			if !o.Census || o.CensusPrometheus != want {
				t.Errorf("census %v, Prometheus %+v, want %+v", o.Census, o.CensusPrometheus, want)
			}
			pod := convert[appsv1.Deployment](t, find(objs, "Deployment", "")).Spec.Template.Spec
			if len(pod.Volumes) != 1 || pod.Volumes[0].Secret == nil || pod.Volumes[0].Secret.SecretName != "monitoring-ca" ||
				len(pod.Containers[0].VolumeMounts) != 1 || pod.Containers[0].VolumeMounts[0].MountPath != "/etc/hotcert/census-prometheus" || pod.Containers[0].VolumeMounts[0].SubPath != "" {
				t.Errorf("the Secret monitoring-ca is not mounted as a folder at /etc/hotcert/census-prometheus: %+v %+v", pod.Volumes, pod.Containers[0].VolumeMounts)
			}
		}},
		{"webhook with cert-manager", map[string]any{
			"webhook": map[string]any{"enabled": true},
		}, func(t *testing.T, objs []*unstructured.Unstructured, _ *options.Options) {
			checkWebhook(t, objs, true)
		}},
		{"webhook with a Secret of one's own, and a hash key", map[string]any{
			"controller": map[string]any{"hashKeySecret": "hotcert-hash-key"},
			"webhook": map[string]any{"enabled": true, "certManager": map[string]any{"enabled": false},
				"secretName": "my-webhook-tls", "caBundle": base64.StdEncoding.EncodeToString(hotcerttest.MustNewCA().CertPEM)},
		}, func(t *testing.T, objs []*unstructured.Unstructured, o *options.Options) {
			checkWebhook(t, objs, false)
			dep := convert[appsv1.Deployment](t, find(objs, "Deployment", ""))
			var secrets []string
			for _, v := range dep.Spec.Template.Spec.Volumes {
				secrets = append(secrets, v.Secret.SecretName)
			}
			if !slices.Equal(secrets, []string{"hotcert-hash-key", "my-webhook-tls"}) || o.HashKeyFile == "" {
				t.Errorf("volumes of Secrets %v, hash key file %q", secrets, o.HashKeyFile)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := helmTemplate(t, "hotcert", ns, tc.values)
			for _, o := range objs {
				err := env.Client().Create(ctx, o.DeepCopy(), client.DryRunAll, client.FieldValidation("Strict"))
				if o.GetKind() == "CustomResourceDefinition" && apierrors.IsAlreadyExists(err) {
					continue // validated before the name clashes with the CRD another test installed
				}
				if err != nil {
					t.Fatalf("the API server rejects %s %s: %v", o.GetKind(), o.GetName(), err)
				}
			}
			for _, crd := range []string{"referencerules.hotcert.dev", "trustrotations.hotcert.dev"} {
				if find(objs, "CustomResourceDefinition", crd) == nil {
					t.Errorf("no CRD %s", crd)
				}
			}
			rules, aggregated := clusterRoles(t, objs)
			if !reflect.DeepEqual(rules.Rules, wantRules.Rules) {
				t.Errorf("chart ClusterRole rules %v differ from kustomize's %v", rules.Rules, wantRules.Rules)
			}
			if !reflect.DeepEqual(aggregated.AggregationRule, wantAggregated.AggregationRule) {
				t.Errorf("chart aggregation rule %v differs from kustomize's %v", aggregated.AggregationRule, wantAggregated.AggregationRule)
			}
			dep := convert[appsv1.Deployment](t, find(objs, "Deployment", ""))
			sa := dep.Spec.Template.Spec.ServiceAccountName
			for _, b := range objs {
				if b.GetKind() != "ClusterRoleBinding" {
					continue
				}
				crb := convert[rbacv1.ClusterRoleBinding](t, b)
				if len(crb.Subjects) != 1 || crb.Subjects[0].Name != sa || crb.Subjects[0].Namespace != ns {
					t.Errorf("ClusterRoleBinding %s binds %v, not the controller's ServiceAccount %s/%s", crb.Name, crb.Subjects, ns, sa)
				}
			}
			o := containerArgs(t, dep)
			if img, want := dep.Spec.Template.Spec.Containers[0].Image, controllerImage(t); img != want {
				t.Errorf("image %s, want %s (what make image builds)", img, want)
			}
			role := convert[rbacv1.Role](t, find(objs, "Role", ""))
			if !slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.ResourceNames, o.LeaderElectionID) }) {
				t.Errorf("the Role does not name the Lease %q", o.LeaderElectionID)
			}
			tc.check(t, objs, o)
		})
	}
	t.Run("webhook without cert-manager needs a Secret", func(t *testing.T) {
		_, err := helmTemplateErr(t, "hotcert", ns, map[string]any{
			"webhook": map[string]any{"enabled": true, "certManager": map[string]any{"enabled": false}, "caBundle": "Cg=="},
		})
		if err == nil || !strings.Contains(err.Error(), "webhook.secretName is required") {
			t.Fatalf("rendered, or failed with %v", err)
		}
	})
}
