package kube

import (
	"crypto/tls"
	"errors"
	"io"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/source/file"
	"github.com/hotcert/hotcert/tlsconfig"
)

// TestPodCertificateWithClusterTrustBundleTrust wires a pod the Kubernetes-native
// way: its identity from a podCertificate projected volume's credential bundle, its
// trust from the signer's ClusterTrustBundles through the API, validated as one
// snapshot, served to mutual-TLS handshakes. A CA rotation — the signer's new root
// published as a second bundle, then the pod certificate re-issued by it — keeps
// every handshake working.
func TestPodCertificateWithClusterTrustBundleTrust(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	api := env.Clientset().CertificatesV1().ClusterTrustBundles()
	domain := uniqueName(t, "") + ".example.com"
	signer := domain + "/serving"
	oldRoot, newRoot := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	create := func(n string, ca *hotcerttest.CA) {
		t.Helper()
		if _, err := api.Create(ctx, trustBundle(domain+":serving:"+n, signer, nil, hotcerttest.BundlePEM(ca)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = api.Delete(ctx, domain+":serving:"+n, metav1.DeleteOptions{}) })
	}
	create("v1", oldRoot)

	volume := hotcerttest.MustNewAtomicWriter(filepath.Join(t.TempDir(), "identity"))
	issue := func(ca *hotcerttest.CA) *hotcerttest.Leaf {
		t.Helper()
		l := ca.MustIssue()
		if _, err := volume.Write(map[string][]byte{"credentialbundle.pem": append(append([]byte{}, l.KeyPEM...), l.ChainPEM...)}); err != nil {
			t.Fatal(err)
		}
		return l
	}
	a := issue(oldRoot)
	identity, err := file.New(file.WithCredentialBundle(filepath.Join(volume.Dir(), "credentialbundle.pem")), file.WithRewatchInterval(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	rn := start(t, hotcert.Compose(identity, NewClusterTrustBundlesForSigner(env.Clientset(), signer, nil)),
		hotcert.WithValidation(hotcert.WithChainToOwnTrust()))
	rn.waitServing(t, a)

	ln, err := tls.Listen("tcp", "127.0.0.1:0", tlsconfig.MTLSServerConfig(rn.r))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _ = c.(*tls.Conn).Handshake(); c.Close() }()
		}
	}()
	// A peer of the signer: its own pod certificate, trusting the signer's roots.
	dial := func(peerCA *hotcerttest.CA, roots ...*hotcerttest.CA) error {
		peer := peerCA.MustIssue()
		conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{
			RootCAs: hotcerttest.Pool(roots...), ServerName: "localhost",
			Certificates: []tls.Certificate{peer.TLSCertificate()},
		})
		if err != nil {
			return err
		}
		defer conn.Close()
		// The server verifies the client certificate after the client's handshake
		// returns (TLS 1.3): a read surfaces its refusal.
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = conn.Read(make([]byte, 1))
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		return nil
	}
	if err := dial(oldRoot, oldRoot); err != nil {
		t.Fatalf("mutual TLS with the pod certificate: %v", err)
	}
	if err := dial(newRoot, oldRoot); err == nil {
		t.Fatal("a peer of a root the signer has not published was accepted")
	}

	// Step 1: the signer publishes its new root; step 2: the kubelet gets the pod a
	// certificate of the new root.
	create("v2", newRoot)
	testutil.WaitFor(t, "the new root in the trust bundle", func() bool { return len(rn.r.Current().TrustCertificates()) == 2 })
	if err := dial(newRoot, oldRoot); err != nil {
		t.Fatalf("a peer of the new root after step 1: %v", err)
	}
	b := issue(newRoot)
	rn.waitServing(t, b)
	if err := dial(oldRoot, newRoot); err != nil {
		t.Fatalf("after the pod certificate moved to the new root: %v", err)
	}
	if n := len(rn.obs.Failures()); n != 0 {
		t.Fatalf("failures during the rotation: %v", rn.obs.Failures())
	}
}
