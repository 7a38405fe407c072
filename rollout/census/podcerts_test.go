package census_test

import (
	"crypto/rand"
	"crypto/x509"
	clocktesting "k8s.io/utils/clock/testing"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
	"github.com/hotcert/hotcert/rollout/census"
)

// TestCensusOfPodCertificates: a TrustRotation names a signer whose pod
// certificates (podCertificate projections) are issued under the rotated
// CA. Each pod projecting one is judged against the newest issued
// PodCertificateRequest of its own (on the real API server): a server whose
// request holds a leaf of the old CA and that serves it holds
// switch-server-cert back, named with its request and the handshake; once
// the kubelet's renewal is issued by the new CA and the server serves it, the
// step is done; a pod that reports nothing is proven only by a restart after
// the census saw its new request issued.
func TestCensusOfPodCertificates(t *testing.T) {
	ns := env.NewNamespace(t)
	ctx := testContext(t)
	ip := hostIP(t)
	ca2025 := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2025"))
	ca2026 := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2026"))
	signer := "example.com/" + ns
	create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ca"}, Data: map[string]string{"ca.crt": string(hotcerttest.BundlePEM(ca2025, ca2026))}})
	longAgo := time.Now().Add(-time.Hour)
	server := createPodCertificatePod(t, ns, "server", signer, longAgo)
	quiet := createPodCertificatePod(t, ns, "quiet", signer, longAgo)

	oldLeaf := issuePodCertificate(t, ns, "server-1", server, signer, ca2025)
	issuePodCertificate(t, ns, "quiet-1", quiet, signer, ca2026)
	oldPort := tlsServer(t, ip, oldLeaf)
	slice := endpointSlice(ns, "server", ip, oldPort)
	create(t, slice)

	name := "rot-" + ns
	createRotation(t, name, v1alpha1.TrustRotationSpec{
		OldCA:              v1alpha1.CA{PEM: string(ca2025.CertPEM)},
		NewCA:              v1alpha1.CA{PEM: string(ca2026.CertPEM)},
		Trust:              []v1alpha1.TrustObject{{ConfigMap: &v1alpha1.ObjectKey{Namespace: ns, Name: "ca", Key: "ca.crt"}}},
		ServerCertificates: []v1alpha1.ServerCertificate{{SignerName: signer, ServerName: "cp.example"}},
		Propagation:        v1alpha1.Propagation{Volume: &metav1.Duration{Duration: time.Second}},
	})
	clk := clocktesting.NewFakePassiveClock(time.Now().Truncate(time.Second))
	startCensusWith(t, census.Options{Interval: 300 * time.Millisecond, MinSpacing: 50 * time.Millisecond, Clock: clk})

	tr := waitRotation(t, name, "the census of the pod certificates", func(tr *v1alpha1.TrustRotation) bool {
		return tr.Status.Next == v1alpha1.StepSwitchServerCert && tr.Status.Consumers.Total == 2
	})
	if sc := tr.Status.ServerCertificates[0]; sc.SignerName != signer || sc.Pods != 2 || sc.HoldNew != 1 {
		t.Fatalf("server certificate status %+v", sc)
	}
	serverCert := "the " + signer + " pod certificate of pod " + ns + "/server"
	var object, consumer *v1alpha1.Straggler
	for i, s := range tr.Status.Stragglers {
		switch {
		case s.Pod == "" && s.Object == serverCert:
			object = &tr.Status.Stragglers[i]
		case s.Pod == "server":
			consumer = &tr.Status.Stragglers[i]
		}
	}
	if object == nil || object.Reason != "does not hold a leaf issued by CA-2026" {
		t.Fatalf("the server's pod certificate: straggler %+v, stragglers %+v", object, tr.Status.Stragglers)
	}
	if consumer == nil || consumer.How != "podCertificate" || consumer.Evidence != v1alpha1.EvidenceServed || consumer.Object != serverCert ||
		!strings.HasPrefix(consumer.Reason, "still serves on "+net.JoinHostPort(ip, strconv.Itoa(oldPort))+" a leaf issued by CA-2025") {
		t.Fatalf("the server: straggler %+v", consumer)
	}
	q := straggler(tr, "quiet")
	if q == nil || q.Evidence != v1alpha1.EvidenceUnknown || !strings.Contains(q.Reason, "before a leaf issued by CA-2026 was put in the "+signer+" pod certificate of pod "+ns+"/quiet") {
		t.Fatalf("the quiet pod: straggler %+v", q)
	}
	seen := clk.Now() // when the census saw the quiet pod's request issued before (the clock stands still)

	// The kubelet renews the server's certificate: a newer request, issued
	// by the new CA; the server serves it.
	newLeaf := issuePodCertificate(t, ns, "server-2", server, signer, ca2026)
	newPort := tlsServer(t, ip, newLeaf)
	slice.Ports[0].Port = ptr.To(int32(newPort))
	if err := env.Client().Update(ctx, slice); err != nil {
		t.Fatal(err)
	}
	// The quiet pod restarts after the delay since the census saw its
	// request issued.
	setStarted(t, ns, "quiet", afterDelay(clk, seen, time.Second))
	tr = waitRotation(t, name, "switch-server-cert done", func(tr *v1alpha1.TrustRotation) bool {
		c := condition(tr, v1alpha1.StepSwitchServerCert)
		return c != nil && c.Status == metav1.ConditionTrue
	})
	if e := tr.Status.Consumers.ByEvidence; e.Served != 1 || e.Restarted != 1 {
		t.Fatalf("by evidence %+v", e)
	}
	if sc := tr.Status.ServerCertificates[0]; sc.Pods != 2 || sc.HoldNew != 2 {
		t.Fatalf("server certificate status %+v", sc)
	}
}

// createPodCertificatePod creates a pod whose container mounts a
// podCertificate projection of signer, running since started.
func createPodCertificatePod(t *testing.T, ns, name, signer string, started time.Time) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:1", VolumeMounts: []corev1.VolumeMount{{Name: "tls", MountPath: "/var/run/tls"}}}},
		Volumes: []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{PodCertificate: &corev1.PodCertificateProjection{SignerName: signer, KeyType: "ECDSAP256", CredentialBundlePath: "credentials.pem"}}}}}}},
	}}
	create(t, pod)
	if pod.Spec.Volumes[0].Projected.Sources[0].PodCertificate == nil {
		t.Fatal("the API server dropped the podCertificate projection (is the PodCertificateRequest feature on?)")
	}
	setStarted(t, ns, name, started)
	return pod
}

// issuePodCertificate does what the kubelet and the signer do for pod's
// projection: a PodCertificateRequest for a fresh key (an empty CSR
// signed with it), then its issue by ca (as the signer writes the status). It
// returns the issued leaf.
func issuePodCertificate(t *testing.T, ns, name string, pod *corev1.Pod, signer string, ca *hotcerttest.CA) *hotcerttest.Leaf {
	t.Helper()
	ctx := testContext(t)
	nb := time.Now().Add(-time.Minute).Truncate(time.Second)
	leaf := ca.MustIssue(hotcerttest.WithDNSNames("cp.example"), hotcerttest.WithValidity(nb, nb.Add(2*time.Hour)))
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, leaf.Key) // empty, as the kubelet's
	if err != nil {
		t.Fatal(err)
	}
	pcr := &certificatesv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: certificatesv1.PodCertificateRequestSpec{
		SignerName: signer, PodName: pod.Name, PodUID: pod.UID, ServiceAccountName: "default", ServiceAccountUID: "sa-uid",
		NodeName: "node-1", NodeUID: "node-uid", MaxExpirationSeconds: ptr.To(int32(86400)), StubPKCS10Request: csr,
	}}
	create(t, pcr)
	pcr.Status = certificatesv1.PodCertificateRequestStatus{
		CertificateChain: string(leaf.ChainPEM),
		NotBefore:        ptr.To(metav1.NewTime(leaf.Cert.NotBefore)),
		BeginRefreshAt:   ptr.To(metav1.NewTime(leaf.Cert.NotBefore.Add(time.Hour))),
		NotAfter:         ptr.To(metav1.NewTime(leaf.Cert.NotAfter)),
		Conditions: []metav1.Condition{{Type: certificatesv1.PodCertificateRequestConditionTypeIssued, Status: metav1.ConditionTrue,
			Reason: "Issued", Message: "issued by the test's signer", LastTransitionTime: metav1.Now()}},
	}
	if err := env.Client().Status().Update(ctx, pcr); err != nil {
		t.Fatalf("issuing PodCertificateRequest %s: %v", name, err)
	}
	got := &certificatesv1.PodCertificateRequest{}
	if err := env.Client().Get(ctx, client.ObjectKeyFromObject(pcr), got); err != nil || got.Status.CertificateChain == "" {
		t.Fatalf("PodCertificateRequest %s not issued: %v", name, err)
	}
	return leaf
}
