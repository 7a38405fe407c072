package controller

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/hotcert/hotcert/hotcerttest"
)

// BenchmarkChainedUpdateToPatch measures what following a chain of custom
// resources costs on the path from a Secret update to the pod-template patch:
// in one run, one controller, alternating updates, the latency for Deployments
// that mount their CA Secret (direct) and for Deployments of Agents whose
// ModelConfig names it (chained, through the documented ReferenceRules). It
// reports both medians and their ratio.
func BenchmarkChainedUpdateToPatch(b *testing.B) {
	const pairs = 20
	kagentRules(b)
	ns := env.NewNamespace(b)
	cas := []*hotcerttest.CA{hotcerttest.MustNewCA(), hotcerttest.MustNewCA(), hotcerttest.MustNewCA()}
	var cases []rolloutCase
	for i := range pairs {
		direct, chained := fmt.Sprintf("direct-%02d", i), fmt.Sprintf("chained-%02d", i)
		createSecret(b, secret(ns, direct, map[string]string{"ca.crt": string(cas[0].CertPEM)}))
		createSecret(b, secret(ns, chained, map[string]string{"ca.crt": string(cas[0].CertPEM)}))
		create(b, deployment(ns, direct, 0, mountAll(direct), optIn))
		createCR(b, modelConfigs, "ModelConfig", ns, chained, map[string]any{"tls": map[string]any{"caCertSecretRef": chained}})
		agentDeployment(b, ns, chained, chained, envFrom("none"))
		for _, name := range []string{direct, chained} {
			cases = append(cases, rolloutCase{secret: name, workload: name, mutate: func(s *corev1.Secret, round int) {
				s.Data["ca.crt"] = cas[(round+1)%len(cas)].CertPEM
			}})
		}
	}
	o := testOptions()
	o.ReferenceRules = true
	c := startController(b, ns, o)
	for _, cs := range cases {
		waitAdopted(b, ns, cs.workload)
	}

	lat := updateToPatch(b, ns, cases, max(b.N, 200))
	var direct, chained []time.Duration
	for i, l := range lat {
		if i%2 == 0 {
			direct = append(direct, l)
		} else {
			chained = append(chained, l)
		}
	}
	d50, c50 := percentile(direct, 50), percentile(chained, 50)
	b.ReportMetric(float64(d50.Microseconds())/1000, "ms-p50-direct")
	b.ReportMetric(float64(c50.Microseconds())/1000, "ms-p50-chained")
	b.ReportMetric(float64(c50)/float64(d50), "chained/direct")
	b.Logf("%d updates: update→patch p50 direct %s, chained %s (×%.2f); p99 direct %s, chained %s",
		len(lat), d50.Round(10*time.Microsecond), c50.Round(10*time.Microsecond), float64(c50)/float64(d50),
		percentile(direct, 99).Round(10*time.Microsecond), percentile(chained, 99).Round(10*time.Microsecond))
	c.Stop()
}
