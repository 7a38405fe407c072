package census

import (
	"context"
	"fmt"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
	core "github.com/hotcert/hotcert/rollout/internal/census"
	"github.com/hotcert/hotcert/rollout/internal/census/evidence"
)

// A spec.serverCertificates entry naming a signer stands for the pod
// certificates of that signer: each pod with a podCertificate projection of
// it holds the chain of the newest issued PodCertificateRequest of that pod
// (by UID) and signer, which the kubelet writes into the projection and
// renews from a new request. The census reads those requests from the API
// server (one list per namespace of such pods, per census), and dates each
// one holding a leaf of the new CA when it first sees it issued: it vouches
// for what it saw, so a census that restarts dates them anew (later than the
// truth, never earlier).

// podCertificates returns one state per pod of pods projecting the pod
// certificate of a signer that spec.serverCertificates names. seen holds,
// for each issued request seen before, when it was first seen; it is
// updated to the requests seen now.
func podCertificates(ctx context.Context, r client.Reader, certs []v1alpha1.ServerCertificate, pods []*podRecord,
	oldCA, newCA side, seen map[types.UID]time.Time, now time.Time) []core.State {
	entry := map[string]int{}
	for i, sc := range certs {
		if _, ok := entry[sc.SignerName]; sc.SignerName != "" && !ok {
			entry[sc.SignerName] = i
		}
	}
	if len(entry) == 0 {
		return nil
	}
	type want struct {
		pod    *podRecord
		signer string
	}
	var wants []want
	namespaces := map[string]bool{}
	var p corev1.Pod
	for _, r := range pods {
		r.fill(&p)
		for _, s := range core.PodCertificateSigners(&p) {
			if _, ok := entry[s]; ok {
				wants = append(wants, want{r, s})
				namespaces[r.namespace] = true
			}
		}
	}
	// The newest issued request of each pod and signer.
	type key struct {
		pod    podUID
		signer string
	}
	newest := map[key]*certificatesv1.PodCertificateRequest{}
	listErr := map[string]error{}
	now0 := map[types.UID]time.Time{}
	for ns := range namespaces {
		list := &certificatesv1.PodCertificateRequestList{}
		if err := r.List(ctx, list, client.InNamespace(ns)); err != nil {
			listErr[ns] = fmt.Errorf("listing the PodCertificateRequests of namespace %s: %w", ns, err)
			continue
		}
		for i := range list.Items {
			pcr := &list.Items[i]
			if pcr.Status.CertificateChain == "" || !meta.IsStatusConditionTrue(pcr.Status.Conditions, certificatesv1.PodCertificateRequestConditionTypeIssued) {
				continue
			}
			now0[pcr.UID] = core.SeenAt(now)
			if t, ok := seen[pcr.UID]; ok {
				now0[pcr.UID] = t
			}
			k := key{compactUID(pcr.Spec.PodUID), pcr.Spec.SignerName}
			if prev := newest[k]; prev == nil || prev.CreationTimestamp.Before(&pcr.CreationTimestamp) ||
				(prev.CreationTimestamp.Equal(&pcr.CreationTimestamp) && prev.Name < pcr.Name) {
				newest[k] = pcr
			}
		}
	}
	clear(seen)
	for uid, t := range now0 {
		seen[uid] = t
	}
	out := make([]core.State, 0, len(wants))
	for _, w := range wants {
		o := core.Object{Kind: core.KindPodCertificate, Namespace: w.pod.namespace, Name: w.pod.name, SignerName: w.signer,
			Role: core.RoleServer, Origin: entry[w.signer]}
		s := core.State{Object: o}
		pcr := newest[key{w.pod.uid, w.signer}]
		switch {
		case listErr[w.pod.namespace] != nil:
			s.Err = listErr[w.pod.namespace].Error()
		case pcr == nil:
			s.Err = "no issued PodCertificateRequest of signer " + w.signer + " for this pod"
		default:
			chain, err := hotcert.ParseCertificates(hotcert.Input{Name: "PodCertificateRequest " + pcr.Name, Data: []byte(pcr.Status.CertificateChain)})
			if err != nil {
				s.Err = err.Error()
				break
			}
			s.LeafSHA256, s.LeafSerial = hotcert.FingerprintOf(chain[0]).String(), hotcert.FormatSerial(chain[0].SerialNumber)
			s.HoldsNew, s.HoldsOld = evidence.Verifies(chain, newCA.certs), evidence.Verifies(chain, oldCA.certs)
			if s.HoldsNew {
				s.NewSince = seen[pcr.UID]
			}
		}
		out = append(out, s)
	}
	return out
}
