package kube

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
)

func trustBundle(name, signer string, lbls map[string]string, pemData []byte) *certificatesv1.ClusterTrustBundle {
	return &certificatesv1.ClusterTrustBundle{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls},
		Spec:       certificatesv1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: string(pemData)},
	}
}

// handshakeWith dials a TLS server serving leaf, trusting what p holds now.
func handshakeWith(t *testing.T, p hotcert.Provider, leaf *hotcerttest.Leaf) error {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{leaf.TLSCertificate()}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: p.Current().TrustPool(), ServerName: "localhost"})
	if err == nil {
		conn.Close()
	}
	return err
}

// uniqueName returns a cluster-wide name for this test's objects.
func uniqueName(t *testing.T, prefix string) string {
	return prefix + strings.ToLower(strings.ReplaceAll(env.NewNamespace(t), "kubetest-", ""))
}

func TestClusterTrustBundleByName(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	api := env.Clientset().CertificatesV1().ClusterTrustBundles()
	name := uniqueName(t, "agent-roots-")
	oldCA, newCA := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	server := newCA.MustIssue()
	if _, err := api.Create(ctx, trustBundle(name, "", nil, hotcerttest.BundlePEM(oldCA)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err) // certificates.k8s.io/v1 must be served
	}
	t.Cleanup(func() { _ = api.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	rn := start(t, NewClusterTrustBundle(env.Clientset(), name))
	if err := handshakeWith(t, rn.r, server); err == nil {
		t.Fatal("a server of the new CA was trusted before the bundle held it")
	}

	// Step 1 of a CA rotation: the bundle holds both CAs.
	b, err := api.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.Spec.TrustBundle = string(hotcerttest.BundlePEM(oldCA, newCA))
	if b, err = api.Update(ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the union bundle", func() bool { return len(rn.r.Current().TrustCertificates()) == 2 })
	if err := handshakeWith(t, rn.r, server); err != nil {
		t.Fatalf("handshake with the new CA's server: %v", err)
	}

	// A bundle whose second CA is cut: the API server lets it through; hotcert does not.
	b.Spec.TrustBundle = string(hotcerttest.Truncate(hotcerttest.BundlePEM(newCA, oldCA)))
	if b, err = api.Update(ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("the API server refused a bundle with a cut second block (then this case cannot happen): %v", err)
	}
	testutil.WaitFor(t, "the malformed bundle to be refused", func() bool { return len(rn.obs.Failures()) == 1 })
	if err := rn.obs.Failures()[0]; hotcert.ReasonOf(err) != hotcert.ReasonPEM || !strings.Contains(err.Error(), "ClusterTrustBundle "+name) {
		t.Fatalf("refusal %v, want reason pem naming the bundle", err)
	}
	if len(rn.r.Current().TrustCertificates()) != 2 {
		t.Fatal("the malformed bundle replaced the last good trust")
	}

	// Deleted: the last good trust keeps serving, one failure.
	if err := api.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the deletion to be reported", func() bool { return len(rn.obs.Failures()) == 2 })
	if err := rn.obs.Failures()[1]; hotcert.ReasonOf(err) != hotcert.ReasonMissing {
		t.Fatalf("deletion reported as %v", err)
	}
	for range 3 {
		_ = rn.r.Reload(ctx)
	}
	if n := len(rn.obs.Failures()); n != 2 || rn.logs.Count("TLS certificate reload failed") != 2 {
		t.Fatalf("failures %d, lines %d; want 2 and 2 (the deletion once)", n, rn.logs.Count("TLS certificate reload failed"))
	}
	if err := handshakeWith(t, rn.r, server); err != nil {
		t.Fatalf("after the deletion the last good trust must keep serving: %v", err)
	}
	// Recreated: loaded.
	if _, err := api.Create(ctx, trustBundle(name, "", nil, hotcerttest.BundlePEM(newCA)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the recreated bundle", func() bool {
		cas := rn.r.Current().TrustCertificates()
		return len(cas) == 1 && cas[0].Equal(newCA.Cert)
	})
}

func TestClusterTrustBundlesForSignerAreUnioned(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	api := env.Clientset().CertificatesV1().ClusterTrustBundles()
	domain := uniqueName(t, "") + ".example.com"
	signer, other := domain+"/serving", domain+"/other"
	prefix := domain + ":serving:"
	a, b, c, d := hotcerttest.MustNewCA(), hotcerttest.MustNewCA(), hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	create := func(ctb *certificatesv1.ClusterTrustBundle) {
		t.Helper()
		if _, err := api.Create(ctx, ctb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = api.Delete(context.Background(), ctb.Name, metav1.DeleteOptions{}) })
	}
	prod := map[string]string{"env": "prod"}
	create(trustBundle(prefix+"v1", signer, prod, hotcerttest.BundlePEM(a, b)))
	create(trustBundle(prefix+"v2", signer, prod, hotcerttest.BundlePEM(b))) // b in both: once in the union
	create(trustBundle(prefix+"dev", signer, map[string]string{"env": "dev"}, hotcerttest.BundlePEM(c)))
	create(trustBundle(domain+":other:v1", other, prod, hotcerttest.BundlePEM(d)))

	src := NewClusterTrustBundlesForSigner(env.Clientset(), signer, labels.SelectorFromSet(prod))
	rn := start(t, src)
	want := func(cas ...*hotcerttest.CA) func() bool {
		return func() bool {
			got := rn.r.Current().TrustCertificates()
			if len(got) != len(cas) {
				return false
			}
			for i, ca := range cas {
				if !got[i].Equal(ca.Cert) {
					return false
				}
			}
			return true
		}
	}
	if !want(a, b)() {
		t.Fatalf("trust %d CAs, want a and b: the signer's prod bundles, each CA once", len(rn.r.Current().TrustCertificates()))
	}
	testutil.WaitFor(t, "informer sync", func() bool { return src.informer.store.Load() != nil })
	if n := src.informer.cachedObjects(); n != 2 {
		t.Fatalf("the informer caches %d bundles, want only the 2 selected", n)
	}

	create(trustBundle(prefix+"v3", signer, prod, hotcerttest.BundlePEM(c)))
	testutil.WaitFor(t, "a new matching bundle joins the union", want(a, b, c))
	del := func(n string) {
		t.Helper()
		if err := api.Delete(ctx, prefix+n, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	del("v1")
	testutil.WaitFor(t, "a deleted bundle leaves the union", want(b, c))
	del("v2")
	testutil.WaitFor(t, "a deleted bundle leaves the union", want(c))
	if len(rn.obs.Failures()) != 0 {
		t.Fatalf("failures while bundles remained: %v", rn.obs.Failures())
	}
	del("v3")
	testutil.WaitFor(t, "no bundle left reported", func() bool { return len(rn.obs.Failures()) == 1 })
	if err := rn.obs.Failures()[0]; hotcert.ReasonOf(err) != hotcert.ReasonMissing || !strings.Contains(err.Error(), signer) {
		t.Fatalf("reported %v", err)
	}
	if !want(c)() {
		t.Fatal("the last good trust did not keep serving")
	}
}

func TestClusterTrustBundleMinimalRBAC(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	api := env.Clientset().CertificatesV1().ClusterTrustBundles()
	name, unrelated := uniqueName(t, "agent-roots-"), uniqueName(t, "unrelated-")
	a, b := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	for _, n := range []string{name, unrelated} {
		if _, err := api.Create(ctx, trustBundle(n, "", nil, hotcerttest.BundlePEM(a)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = api.Delete(context.Background(), n, metav1.DeleteOptions{}) })
	}
	cfg := env.NewRestrictedConfig(t, "trust-reader-"+name, []rbacv1.PolicyRule{{
		APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"clustertrustbundles"},
		ResourceNames: []string{name}, Verbs: []string{"get", "list", "watch"},
	}}, "")
	restricted, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := restricted.CertificatesV1().ClusterTrustBundles().Get(ctx, unrelated, metav1.GetOptions{}); err == nil {
		t.Fatal("the restricted user can read another bundle: the test proves nothing")
	}
	src := NewClusterTrustBundle(restricted, name)
	rn := start(t, src)
	testutil.WaitFor(t, "informer sync", func() bool { return src.informer.store.Load() != nil })
	bundle, err := api.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bundle.Spec.TrustBundle = string(hotcerttest.BundlePEM(b))
	if _, err := api.Update(ctx, bundle, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the update through a watch of one name", func() bool {
		cas := rn.r.Current().TrustCertificates()
		return len(cas) == 1 && cas[0].Equal(b.Cert)
	})
	if n := len(rn.obs.Failures()); n != 0 {
		t.Fatalf("failures with minimal RBAC: %v", rn.obs.Failures())
	}
}

// TestClusterTrustBundlesForSignerMinimalRBAC: following a signer's bundles needs
// list and watch on ClusterTrustBundles, nothing else (no get, no Secrets).
func TestClusterTrustBundlesForSignerMinimalRBAC(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	api := env.Clientset().CertificatesV1().ClusterTrustBundles()
	domain := uniqueName(t, "") + ".example.com"
	signer, name := domain+"/serving", domain+":serving:v1"
	a, b := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	if _, err := api.Create(ctx, trustBundle(name, signer, nil, hotcerttest.BundlePEM(a)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = api.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	cfg := env.NewRestrictedConfig(t, "signer-reader-"+domain, []rbacv1.PolicyRule{{
		APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"clustertrustbundles"}, Verbs: []string{"list", "watch"},
	}}, "")
	restricted, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := restricted.CertificatesV1().ClusterTrustBundles().Get(ctx, name, metav1.GetOptions{}); err == nil {
		t.Fatal("the restricted user may get bundles: the test proves nothing about get")
	}
	rn := start(t, NewClusterTrustBundlesForSigner(restricted, signer, nil))
	bundle, err := api.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bundle.Spec.TrustBundle = string(hotcerttest.BundlePEM(a, b))
	if _, err := api.Update(ctx, bundle, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the update", func() bool { return len(rn.r.Current().TrustCertificates()) == 2 })
	if n := len(rn.obs.Failures()); n != 0 {
		t.Fatalf("failures with list and watch only: %v", rn.obs.Failures())
	}
}
