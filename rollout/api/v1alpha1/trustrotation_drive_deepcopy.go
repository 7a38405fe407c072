package v1alpha1

import "slices"

// Hand-written deep copies of the drive types.

// DeepCopy returns a deep copy of d.
func (d *DriveSpec) DeepCopy() *DriveSpec {
	if d == nil {
		return nil
	}
	out := *d
	out.Bundle = DriveBundle{ConfigMap: clonePtr(d.Bundle.ConfigMap), Secret: clonePtr(d.Bundle.Secret),
		Bundle: clonePtr(d.Bundle.Bundle), ClusterTrustBundle: clonePtr(d.Bundle.ClusterTrustBundle)}
	out.Reissue = Reissue{CertManager: clonePtr(d.Reissue.CertManager), External: clonePtr(d.Reissue.External)}
	if d.Canary != nil {
		c := *d.Canary
		c.Selector = d.Canary.Selector.DeepCopy()
		c.Soak = clonePtr(d.Canary.Soak)
		out.Canary = &c
	}
	out.DeadlineMargin = clonePtr(d.DeadlineMargin)
	out.HandshakeFailureThreshold = clonePtr(d.HandshakeFailureThreshold)
	return &out
}

// DeepCopy returns a deep copy of d.
func (d *DriveStatus) DeepCopy() *DriveStatus {
	if d == nil {
		return nil
	}
	out := *d
	if d.Steps != nil {
		out.Steps = make([]DriveStepStatus, len(d.Steps))
		for i, s := range d.Steps {
			out.Steps[i] = DriveStepStatus{Name: s.Name, Started: s.Started.DeepCopy(), CanaryWritten: s.CanaryWritten.DeepCopy(),
				CanaryDone: s.CanaryDone.DeepCopy(), Written: s.Written.DeepCopy(), Done: s.Done.DeepCopy()}
		}
	}
	out.Issuers = slices.Clone(d.Issuers)
	out.Plan = slices.Clone(d.Plan)
	out.Deadline = d.Deadline.DeepCopy()
	out.FailuresSince = d.FailuresSince.DeepCopy()
	return &out
}
