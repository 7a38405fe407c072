package census

import (
	"context"

	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
	core "github.com/hotcert/hotcert/rollout/internal/census"
	"github.com/hotcert/hotcert/rollout/internal/census/evidence"
	"github.com/hotcert/hotcert/rollout/internal/drive"
)

// failures reads, with one Prometheus query, the handshake failures that
// mean "not trusted" which the rotation's consumers (the pods of this
// census) counted since status.drive.failuresSince: what stops a driven
// rotation. nil when there is nothing to read them from or nothing to
// count: no Prometheus in spec.evidence, no write yet, the stop turned off.
// A Prometheus that does not answer stops nothing (the census states its
// error).
func (c *Census) failures(ctx context.Context, tr *v1alpha1.TrustRotation, res *core.Result) []drive.Failure {
	p, prev := tr.Spec.Evidence.Prometheus, tr.Status.Drive
	if p == nil || prev == nil || prev.FailuresSince == nil {
		return nil
	}
	spec := tr.Spec.Drive
	if t := spec.HandshakeFailureThreshold; t != nil && *t <= 0 || spec.DryRun || spec.Action != "" && spec.Action != v1alpha1.ActionRun {
		return nil // the stop is off, or the decision does not run the rotation
	}
	switch prev.Phase {
	case v1alpha1.PhaseComplete, v1alpha1.PhaseAborted, v1alpha1.PhaseRolledBack, v1alpha1.PhaseRollingBack, v1alpha1.PhaseStopped:
		return nil
	}
	q := evidence.Prometheus{URL: p.URL, Client: c.opts.prometheusClient(p.URL), NamespaceLabel: p.NamespaceLabel, PodLabel: p.PodLabel, Prefix: p.MetricPrefix}
	fs, err := q.HandshakeFailures(ctx, prev.FailuresSince.Time, drive.FailureReasons)
	if err != nil || len(fs) == 0 {
		return nil
	}
	consumers := map[string]bool{}
	for _, k := range res.Consumers {
		consumers[k.Pod.Key()] = true
	}
	var out []drive.Failure
	for _, f := range fs {
		if consumers[f.Pod] {
			out = append(out, drive.Failure{Pod: f.Pod, Reason: f.Reason, Count: f.Count})
		}
	}
	return out
}
