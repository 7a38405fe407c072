package controller

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

const deployDir = "../../deploy"

// decodeYAML splits a multi-document YAML stream into objects.
func decodeYAML(t testing.TB, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if err.Error() == "EOF" {
				return out
			}
			t.Fatalf("decoding YAML: %v", err)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

// kustomizeBase reads deploy/kustomize/base: every resource its
// kustomization.yaml lists.
func kustomizeBase(t testing.TB) []*unstructured.Unstructured {
	t.Helper()
	dir := filepath.Join(deployDir, "kustomize", "base")
	raw, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Namespace string   `json:"namespace"`
		Resources []string `json:"resources"`
	}
	if err := yaml.UnmarshalStrict(raw, &k, yaml.DisallowUnknownFields); err != nil {
		// labels and images are there too; read leniently for the list.
		if err := yaml.Unmarshal(raw, &k); err != nil {
			t.Fatal(err)
		}
	}
	var objs []*unstructured.Unstructured
	for _, r := range k.Resources {
		data, err := os.ReadFile(filepath.Join(dir, r))
		if err != nil {
			t.Fatalf("kustomization lists %s: %v", r, err)
		}
		for _, o := range decodeYAML(t, data) {
			if o.GetNamespace() != "" && o.GetNamespace() != k.Namespace {
				t.Errorf("%s %s is in namespace %s, the kustomization's is %s", o.GetKind(), o.GetName(), o.GetNamespace(), k.Namespace)
			}
			objs = append(objs, o)
		}
	}
	return objs
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && (name == "" || o.GetName() == name) {
			return o
		}
	}
	return nil
}

func convert[T any](t testing.TB, u *unstructured.Unstructured) *T {
	t.Helper()
	if u == nil {
		t.Fatalf("missing %T", new(T))
	}
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, out, true); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return out
}

// checkArgs parses a controller container's arguments with the real flags.
func checkArgs(t testing.TB, d *appsv1.Deployment) Config {
	t.Helper()
	args := d.Spec.Template.Spec.Containers[0].Args
	if len(args) == 0 || args[0] != "controller" {
		t.Fatalf("args %v do not run `hotcert controller`", args)
	}
	cfg := DefaultConfig()
	fs := pflag.NewFlagSet("controller", pflag.ContinueOnError)
	cfg.AddFlags(fs)
	fs.String("log-format", "text", "")
	fs.String("log-level", "info", "")
	if err := fs.Parse(args[1:]); err != nil {
		t.Fatalf("args %v: %v", args, err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("args %v: %v", args, err)
	}
	return cfg
}

// TestKustomizeManifests applies deploy/kustomize/base to the API server, then
// runs the controller as its ServiceAccount, holding exactly the RBAC the
// manifests grant: it adopts, rolls, records Events and holds its Lease.
func TestKustomizeManifests(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	objs := kustomizeBase(t)
	for _, o := range objs {
		if err := env.Client().Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("applying %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	t.Cleanup(func() {
		for _, o := range slices.Backward(objs) {
			_ = env.Client().Delete(testContext(t), o)
		}
	})
	dep := convert[appsv1.Deployment](t, find(objs, "Deployment", "hotcert-controller"))
	cfg := checkArgs(t, dep)
	if !cfg.LeaderElect || cfg.LeaderElectionID != "hotcert-controller" {
		t.Fatalf("leader election %v %q", cfg.LeaderElect, cfg.LeaderElectionID)
	}
	role := convert[rbacv1.Role](t, find(objs, "Role", ""))
	if !slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.ResourceNames, cfg.LeaderElectionID) }) {
		t.Fatalf("the Role does not name the Lease %q", cfg.LeaderElectionID)
	}

	// The controller, as the ServiceAccount.
	sa := convert[corev1.ServiceAccount](t, find(objs, "ServiceAccount", ""))
	rc := env.Config()
	rc.Impersonate.UserName = fmt.Sprintf("system:serviceaccount:%s:%s", sa.Namespace, sa.Name)
	rc.Impersonate.Groups = []string{"system:serviceaccounts", "system:serviceaccounts:" + sa.Namespace, "system:authenticated"}

	ns := env.NewNamespace(t)
	createSecret(t, secret(ns, "s", map[string]string{"a": "1"}))
	create(t, deployment(ns, "app", 0, envFrom("s", "a"), optIn))
	c := startControllerWith(t, rc, ns, testOptions(), func(o *ctrlOptions) {
		o.LeaderElection, o.LeaderElectionID, o.LeaderElectionNamespace = true, cfg.LeaderElectionID, sa.Namespace
		o.LeaderElectionReleaseOnCancel = true
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = ptr.To(3*time.Second), ptr.To(2*time.Second), ptr.To(200*time.Millisecond)
	})
	waitAdopted(t, ns, "app")
	updateSecret(t, ns, "s", setKey("a", "2"))
	waitReplicaSets(t, ns, "app", 2)
	waitEvent(t, ns, "app", EventRolled, "Secret s key a changed")
	if _, err := clientset().CoordinationV1().Leases(sa.Namespace).Get(ctx, cfg.LeaderElectionID, metav1.GetOptions{}); err != nil {
		t.Fatalf("no Lease: %v", err)
	}
	if strings.Contains(c.logs.String(), "forbidden") {
		t.Fatalf("the manifests' RBAC is not enough:\n%s", c.logs)
	}
}

// TestKustomizeDryRunOverlay checks the overlay's patch applies to the base.
func TestKustomizeDryRunOverlay(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(deployDir, "kustomize", "overlays", "dry-run", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte("../../base")) || !bytes.Contains(raw, []byte("/spec/template/spec/containers/0/args/-")) || !bytes.Contains(raw, []byte("--dry-run=true")) {
		t.Fatalf("overlay does not add --dry-run to the base:\n%s", raw)
	}
	dep := convert[appsv1.Deployment](t, find(kustomizeBase(t), "Deployment", "hotcert-controller"))
	dep.Spec.Template.Spec.Containers[0].Args = append(dep.Spec.Template.Spec.Containers[0].Args, "--dry-run=true")
	if cfg := checkArgs(t, dep); !cfg.DryRun {
		t.Fatal("--dry-run=true did not set dry run")
	}
}

// TestHelmChart renders the chart with Helm's template language (the subset it
// uses), checks that its RBAC is the kustomize RBAC, that the controller
// accepts its arguments, and that the API server accepts every object
// (server-side dry run).
func TestHelmChart(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ns := env.NewNamespace(t)
	base := kustomizeBase(t)
	for _, tc := range []struct {
		name   string
		values map[string]any
	}{
		{"defaults", nil},
		{"dry run, namespaces, hash key, one replica", map[string]any{
			"replicaCount": 1,
			"controller":   map[string]any{"dryRun": true, "namespaces": []any{"team-a", "team-b"}, "hashKeySecret": "hotcert-hash-key"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := decodeYAML(t, renderChart(t, filepath.Join(deployDir, "helm", "hotcert-controller"), "hotcert", ns, tc.values))
			for _, o := range objs {
				if err := env.Client().Create(ctx, o, client.DryRunAll); err != nil {
					t.Fatalf("the API server rejects %s %s: %v", o.GetKind(), o.GetName(), err)
				}
			}
			cr := convert[rbacv1.ClusterRole](t, find(objs, "ClusterRole", ""))
			if want := convert[rbacv1.ClusterRole](t, find(base, "ClusterRole", "")); !reflect.DeepEqual(cr.Rules, want.Rules) {
				t.Errorf("chart ClusterRole rules %v differ from kustomize's %v", cr.Rules, want.Rules)
			}
			dep := convert[appsv1.Deployment](t, find(objs, "Deployment", ""))
			cfg := checkArgs(t, dep)
			role := convert[rbacv1.Role](t, find(objs, "Role", ""))
			if !slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.ResourceNames, cfg.LeaderElectionID) }) {
				t.Errorf("the Role does not name the Lease %q", cfg.LeaderElectionID)
			}
			if tc.values != nil {
				if !cfg.DryRun || !reflect.DeepEqual(cfg.Namespaces, []string{"team-a", "team-b"}) || cfg.HashKeyFile == "" {
					t.Errorf("values not passed: %+v", cfg)
				}
				if find(objs, "PodDisruptionBudget", "") != nil {
					t.Error("a PodDisruptionBudget for one replica")
				}
			} else if find(objs, "PodDisruptionBudget", "") == nil || find(objs, "Service", "") == nil {
				t.Error("missing PodDisruptionBudget or Service")
			}
		})
	}
}

// renderChart renders a chart's templates as `helm template` does, for the
// template functions the chart uses.
func renderChart(t testing.TB, dir, release, namespace string, overrides map[string]any) []byte {
	t.Helper()
	var chart map[string]any
	readYAML(t, filepath.Join(dir, "Chart.yaml"), &chart)
	var values map[string]any
	readYAML(t, filepath.Join(dir, "values.yaml"), &values)
	mergeValues(values, overrides)
	data := map[string]any{
		"Values":  values,
		"Release": map[string]any{"Name": release, "Namespace": namespace, "Service": "Helm"},
		"Chart":   map[string]any{"Name": chart["name"], "Version": chart["version"], "AppVersion": chart["appVersion"]},
	}
	root := template.New("chart").Option("missingkey=error")
	root.Funcs(template.FuncMap{
		"include": func(name string, data any) (string, error) {
			var b strings.Builder
			err := root.ExecuteTemplate(&b, name, data)
			return b.String(), err
		},
		"toYaml": func(v any) (string, error) {
			b, err := yaml.Marshal(v)
			return strings.TrimSuffix(string(b), "\n"), err
		},
		"nindent": func(n int, s string) string {
			pad := strings.Repeat(" ", n)
			return "\n" + pad + strings.ReplaceAll(s, "\n", "\n"+pad)
		},
		"quote": func(v any) string { return fmt.Sprintf("%q", fmt.Sprint(v)) },
		"default": func(d, v any) any {
			if v == nil || reflect.ValueOf(v).IsZero() {
				return d
			}
			return v
		},
		"trunc": func(n int, s string) string {
			if len(s) > n {
				return s[:n]
			}
			return s
		},
		"trimSuffix": func(suffix, s string) string { return strings.TrimSuffix(s, suffix) },
		"contains":   func(sub, s string) bool { return strings.Contains(s, sub) },
		"int":        func(v any) int { return int(reflect.ValueOf(v).Convert(reflect.TypeFor[float64]()).Float()) },
	})
	files, err := filepath.Glob(filepath.Join(dir, "templates", "*"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := root.New(filepath.Base(f)).Parse(string(raw)); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	var out bytes.Buffer
	for _, f := range files {
		name := filepath.Base(f)
		if strings.HasPrefix(name, "_") || !strings.HasSuffix(name, ".yaml") {
			continue
		}
		fmt.Fprintf(&out, "---\n# Source: %s\n", name)
		if err := root.ExecuteTemplate(&out, name, data); err != nil {
			t.Fatalf("rendering %s: %v", name, err)
		}
		out.WriteString("\n")
	}
	return out.Bytes()
}

func readYAML(t testing.TB, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func mergeValues(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				mergeValues(dm, sm)
				continue
			}
		}
		if n, ok := v.(int); ok {
			v = float64(n) // as YAML numbers decode
		}
		dst[k] = v
	}
}
