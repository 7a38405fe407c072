package deploy

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// The alert rule files that promtool tests (package prometheus): the default
// rules, and the opt-in absolute expiry thresholds.
var (
	rulesFile         = filepath.Join("prometheus", "hotcert-alerts.yaml")
	absoluteRulesFile = filepath.Join("prometheus", "hotcert-alerts-absolute.yaml")
)

// TestMonitoringManifests checks the Prometheus Operator objects of the chart
// (monitoring.* values) and of the kustomize monitoring overlays: they read as
// the PrometheusRule's spec is exactly the rule file promtool tests (with the
// absolute expiry thresholds, its groups followed by those of the absolute
// rule file); the ServiceMonitor scrapes the port the controller serves its
// metrics on. Off by default: the default chart and the base have none. (The
// Prometheus Operator's CRDs are not installed here: its schema is not
// checked.)
func TestMonitoringManifests(t *testing.T) {
	rules := readRuleFile(t, rulesFile)
	withAbsolute := map[string]any{"groups": append(slices.Clone(rules["groups"].([]any)), readRuleFile(t, absoluteRulesFile)["groups"].([]any)...)}
	for _, f := range []string{rulesFile, absoluteRulesFile} {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		chartFile := filepath.Join(chartDir, "files", filepath.Base(f))
		chartCopy, err := os.ReadFile(chartFile)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(chartCopy, raw) {
			t.Errorf("%s differs from %s: copy it", chartFile, f)
		}
	}
	chart := func(absolute bool) []*unstructured.Unstructured {
		rule := map[string]any{"enabled": true}
		if absolute {
			rule["absoluteExpiry"] = true
		}
		return helmTemplate(t, "hotcert", "monitoring", map[string]any{"monitoring": map[string]any{
			"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "kube-prometheus"}},
			"prometheusRule": rule,
		}})
	}
	for name, tc := range map[string]struct {
		objs []*unstructured.Unstructured
		want map[string]any
	}{
		"chart":                                  {chart(false), rules},
		"chart with absoluteExpiry":              {chart(true), withAbsolute},
		"kustomize overlay":                      {kustomize(t, "overlays/monitoring"), rules},
		"kustomize overlay with absolute expiry": {kustomize(t, "overlays/monitoring-absolute-expiry"), withAbsolute},
	} {
		t.Run(name, func(t *testing.T) {
			pr := find(tc.objs, "PrometheusRule", "")
			if pr == nil || pr.GetAPIVersion() != "monitoring.coreos.com/v1" {
				t.Fatalf("no monitoring.coreos.com/v1 PrometheusRule: %v", pr)
			}
			if spec, _, _ := unstructured.NestedMap(pr.Object, "spec"); !reflect.DeepEqual(spec, tc.want) {
				t.Errorf("the PrometheusRule's spec differs from the rule files: groups %v, want %v", groupNames(spec), groupNames(tc.want))
			}
			sm := convert[serviceMonitor](t, find(tc.objs, "ServiceMonitor", ""))
			dep := convert[appsv1.Deployment](t, find(tc.objs, "Deployment", ""))
			checkServiceMonitor(t, tc.objs, sm, dep)
		})
	}
	if _, err := helmTemplateErr(t, "hotcert", "monitoring", map[string]any{
		"metrics":    map[string]any{"service": map[string]any{"enabled": false}},
		"monitoring": map[string]any{"serviceMonitor": map[string]any{"enabled": true}},
	}); err == nil || !strings.Contains(err.Error(), "needs metrics.service.enabled") {
		t.Errorf("a ServiceMonitor without the metrics Service rendered, or failed with %v", err)
	}
	for name, objs := range map[string][]*unstructured.Unstructured{
		"chart defaults": helmTemplate(t, "hotcert", "monitoring", nil),
		"kustomize base": kustomize(t, "base"),
	} {
		if find(objs, "PrometheusRule", "") != nil || find(objs, "ServiceMonitor", "") != nil {
			t.Errorf("%s: Prometheus Operator objects, which need its CRDs, are on by default", name)
		}
	}
}

// readRuleFile reads a Prometheus rule file as the generic map a
// PrometheusRule's spec decodes to.
func readRuleFile(t testing.TB, path string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rules map[string]any
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if _, ok := rules["groups"].([]any); !ok {
		t.Fatalf("%s: no groups", path)
	}
	return rules
}

// groupNames returns the names of the rule groups of a rule file's content.
func groupNames(rules map[string]any) []any {
	var names []any
	gs, _ := rules["groups"].([]any)
	for _, g := range gs {
		if m, ok := g.(map[string]any); ok {
			names = append(names, m["name"])
		}
	}
	return names
}

// checkServiceMonitor checks that sm selects, in the controller's namespace,
// a Service of objs whose port named as the endpoint's reaches the container
// port the controller's --metrics-bind-address listens on.
func checkServiceMonitor(t *testing.T, objs []*unstructured.Unstructured, sm *serviceMonitor, dep *appsv1.Deployment) {
	t.Helper()
	if sm.Namespace != dep.Namespace || !slices.Equal(sm.Spec.NamespaceSelector.MatchNames, []string{dep.Namespace}) {
		t.Errorf("ServiceMonitor in %s for namespaces %v; the controller is in %s", sm.Namespace, sm.Spec.NamespaceSelector.MatchNames, dep.Namespace)
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port == "" || sm.Spec.Endpoints[0].Path != "/metrics" {
		t.Fatalf("endpoints %+v: want one, /metrics by port name", sm.Spec.Endpoints)
	}
	portName := sm.Spec.Endpoints[0].Port
	sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	if err != nil || sel.Empty() {
		t.Fatalf("selector %v: %v", sm.Spec.Selector, err)
	}
	_, metricsPort, err := net.SplitHostPort(containerArgs(t, dep).MetricsAddr)
	if err != nil {
		t.Fatal(err)
	}
	c := dep.Spec.Template.Spec.Containers[0]
	scraped := false
	for _, o := range objs {
		if o.GetKind() != "Service" || o.GetNamespace() != dep.Namespace || !sel.Matches(labels.Set(o.GetLabels())) {
			continue
		}
		svc := convert[corev1.Service](t, o)
		for _, p := range svc.Spec.Ports {
			if p.Name != portName {
				continue
			}
			i := slices.IndexFunc(c.Ports, func(cp corev1.ContainerPort) bool {
				return cp.Name == p.TargetPort.String() || strconv.Itoa(int(cp.ContainerPort)) == p.TargetPort.String()
			})
			if i < 0 || strconv.Itoa(int(c.Ports[i].ContainerPort)) != metricsPort {
				t.Errorf("Service %s port %s targets %s, not the metrics port %s", svc.Name, p.Name, p.TargetPort.String(), metricsPort)
			}
			scraped = true
		}
	}
	if !scraped {
		t.Errorf("the ServiceMonitor (%s, port %s) selects no Service with that port", sel, portName)
	}
}

// serviceMonitor is the part of the Prometheus Operator's ServiceMonitor
// (monitoring.coreos.com/v1) the manifests use; convert refuses any other
// field.
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector          metav1.LabelSelector `json:"selector"`
		NamespaceSelector struct {
			MatchNames []string `json:"matchNames"`
		} `json:"namespaceSelector"`
		Endpoints []struct {
			Port     string `json:"port"`
			Path     string `json:"path"`
			Interval string `json:"interval"`
		} `json:"endpoints"`
	} `json:"spec"`
}
