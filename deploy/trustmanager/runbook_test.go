package trustmanager

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/hotcert/hotcert/internal/kubetest"
)

// runbook is the cluster-wide CA rotation runbook.
const runbook = "../../docs/runbooks/rotate-cluster-ca.md"

// TestRunbookRotateClusterCA: every YAML object of the runbook is accepted
// by the API server (server-side dry run, strict field validation) with the
// CRDs of cert-manager, trust-manager and hotcert, and the runbook's
// acknowledgement patch is a valid change of its TrustRotation.
func TestRunbookRotateClusterCA(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	raw, err := os.ReadFile(runbook)
	if err != nil {
		t.Fatal(err)
	}
	installCertManagerCRDs(t, ctx)

	var objs []*unstructured.Unstructured
	for _, m := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllSubmatch(raw, -1) {
		objs = append(objs, kubetest.DecodeYAML(t, m[1])...)
	}
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind())
	}
	if want := []string{"ClusterIssuer", "Certificate", "TrustRotation", "Bundle", "Bundle"}; !slices.Equal(kinds, want) {
		t.Fatalf("the runbook's YAML objects are %v, want %v", kinds, want)
	}
	for _, ns := range []string{"cert-manager", "dexaflow"} {
		if err := env.Client().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	for _, o := range objs {
		var err error
		if werr := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			err = env.Client().Create(ctx, o.DeepCopy(), client.DryRunAll, client.FieldValidation("Strict"))
			return !meta.IsNoMatchError(err), nil // the client's discovery may lag a new CRD
		}); werr != nil || err != nil {
			t.Errorf("the API server rejects the runbook's %s %s: %v %v", o.GetKind(), o.GetName(), err, werr)
		}
	}

	// The acknowledgement patch, on the runbook's TrustRotation.
	patch := regexp.MustCompile(`kubectl patch trustrotation ca-2026 --type=merge -p '([^']+)'`).FindSubmatch(raw)
	if patch == nil {
		t.Fatal("the runbook has no acknowledgement patch")
	}
	tr := objs[slices.Index(kinds, "TrustRotation")].DeepCopy()
	tr.SetName("runbook-" + strings.ToLower(t.Name()))
	if err := env.Client().Create(ctx, tr); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Client().Delete(context.Background(), tr) }()
	if err := env.Client().Patch(ctx, tr, client.RawPatch(types.MergePatchType, patch[1]), client.DryRunAll, client.FieldValidation("Strict")); err != nil {
		t.Fatalf("the API server rejects the runbook's acknowledgement patch: %v", err)
	}
	if acks, _, _ := unstructured.NestedSlice(tr.Object, "spec", "acknowledged"); len(acks) != 1 {
		t.Fatalf("the patch gives %d acknowledgements, want 1", len(acks))
	}
}

// installCertManagerCRDs installs cert-manager's Certificate and Issuer CRDs
// (what hack/build-trust-manager.sh installs) and its ClusterIssuer's, which
// cert-manager generates from the same types as Issuer's at cluster scope.
func installCertManagerCRDs(t *testing.T, ctx context.Context) {
	t.Helper()
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, f := range []string{"cert-manager.io_certificates.yaml", "cert-manager.io_issuers.yaml"} {
		data, err := os.ReadFile(filepath.Join(binDir, "crds", f))
		if err != nil {
			t.Fatalf("%v: run `make trust-manager`", err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		crds = append(crds, crd)
	}
	ci := crds[1].DeepCopy()
	ci.Name = "clusterissuers.cert-manager.io"
	ci.Spec.Scope = apiextensionsv1.ClusterScoped
	ci.Spec.Names = apiextensionsv1.CustomResourceDefinitionNames{Plural: "clusterissuers", Singular: "clusterissuer", Kind: "ClusterIssuer", ListKind: "ClusterIssuerList", Categories: ci.Spec.Names.Categories}
	crds = append(crds, ci)
	// The test's scheme has no apiextensions types: as unstructured (the
	// dry runs wait until the API server serves them).
	for _, crd := range crds {
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: obj}
		u.SetAPIVersion("apiextensions.k8s.io/v1")
		u.SetKind("CustomResourceDefinition")
		if err := env.Client().Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("installing CRD %s: %v", crd.Name, err)
		}
	}
}
