package census

import (
	"cmp"
	"context"
	"crypto/x509"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
	core "github.com/hotcert/hotcert/rollout/internal/census"
	"github.com/hotcert/hotcert/rollout/internal/drive"
)

// certificateGVK is cert-manager's Certificate.
var certificateGVK = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"}

// NotDriving is status.drive.message of a rotation in mode Drive when the
// controller does not drive (Options.Drive, --census-drive, is off).
const NotDriving = "observed only: this controller does not drive rotations (hotcert-controller --census-drive)"

// driven is what a driven rotation's decision leaves for after the status
// is written: its Events, and how soon to decide again.
type driven struct {
	events []drive.Event
	again  time.Duration
}

// drive takes a driven rotation's next move from the census just taken
// (st): it decides (package drive), makes the writes the decision names,
// and puts the progress into st. A rotation not in mode Drive keeps the
// progress it has. A write that fails keeps the progress as it was (the
// move is retried from the status) with the error in its message.
func (c *Census) drive(ctx context.Context, tr *v1alpha1.TrustRotation, st *v1alpha1.TrustRotationStatus, res *core.Result, now time.Time) driven {
	st.Drive = tr.Status.Drive.DeepCopy()
	spec := tr.Spec.Drive
	if !c.drives(tr) || res == nil {
		return driven{} // res nil: the spec is Invalid, as the conditions say
	}
	if !c.opts.Drive {
		if st.Drive == nil {
			st.Drive = &v1alpha1.DriveStatus{}
		}
		st.Drive.Message = NotDriving
		return driven{}
	}
	oldCA, err := loadCA(ctx, c.api, tr.Spec.OldCA, "old")
	var newCA side
	if err == nil {
		newCA, err = loadCA(ctx, c.api, tr.Spec.NewCA, "new")
	}
	if err != nil {
		return c.driveFailed(st, "the CAs cannot be read: "+err.Error())
	}
	in := drive.Input{Now: now, Generation: tr.Generation, Spec: spec, Census: st, Prev: tr.Status.Drive,
		Bundle: bundleIndex(spec.Bundle, tr.Spec.Trust), BundleName: bundleName(spec.Bundle),
		OldCA: oldCA.Name, NewCA: newCA.Name, OldCAExpires: earliestExpiry(oldCA.certs)}
	for _, sc := range tr.Spec.ServerCertificates {
		in.Servers = append(in.Servers, core.Object{Kind: core.KindSecret, Namespace: sc.Namespace, Name: sc.Name, Key: cmp.Or(sc.Key, "tls.crt")}.String())
	}
	if spec.Reissue.CertManager != nil {
		if in.Certificates, in.Missing, err = c.certificates(ctx, tr.Spec.ServerCertificates); err != nil {
			return c.driveFailed(st, err.Error())
		}
	}
	cur := ""
	if tr.Status.Drive != nil {
		cur = tr.Status.Drive.Step
	}
	in.ReadAtStart = readAtStart(res, cur)
	in.RollAfter = rollAfter(st, durationOr(tr.Spec.Propagation.Volume, DefaultVolumeDelay))
	in.Starting = starting(res, st)
	in.Failures = c.failures(ctx, tr, res)
	d := drive.Decide(in)
	for _, w := range d.Writes {
		if err := c.apply(ctx, w, spec.Bundle, oldCA, newCA); err != nil {
			return c.driveFailed(st, err.Error())
		}
	}
	st.Drive = d.Status
	events := d.Events
	for _, pod := range d.Rolls {
		if e, ok := c.roll(ctx, tr.Name, d.RollStep, pod, now); ok {
			events = append(events, e)
		}
	}
	return driven{events: events, again: d.Again}
}

// driveFailed keeps the progress as it was, saying why it could not move.
func (c *Census) driveFailed(st *v1alpha1.TrustRotationStatus, why string) driven {
	if st.Drive == nil {
		st.Drive = &v1alpha1.DriveStatus{}
	}
	st.Drive.Message = "cannot move: " + why
	return driven{events: []drive.Event{{Warning: true, Reason: drive.EventStopped, Message: "cannot move: " + why}}, again: c.opts.MinSpacing}
}

// certificates finds the cert-manager Certificate issuing each server
// certificate Secret (spec.secretName), read from the API server; missing
// names the Secrets none issues.
func (c *Census) certificates(ctx context.Context, servers []v1alpha1.ServerCertificate) (found []drive.Certificate, missing []string, err error) {
	byNS := map[string][]unstructured.Unstructured{}
	for i, sc := range servers {
		list, ok := byNS[sc.Namespace]
		if !ok {
			l := &unstructured.UnstructuredList{}
			l.SetGroupVersionKind(certificateGVK.GroupVersion().WithKind("CertificateList"))
			if err := c.api.List(ctx, l, client.InNamespace(sc.Namespace)); err != nil {
				return nil, nil, fmt.Errorf("listing the cert-manager Certificates of namespace %s: %w", sc.Namespace, err)
			}
			list = l.Items
			byNS[sc.Namespace] = list
		}
		n := 0
		for _, u := range list {
			if name, _, _ := unstructured.NestedString(u.Object, "spec", "secretName"); name != sc.Name {
				continue
			}
			ref := v1alpha1.IssuerRef{}
			ref.Name, _, _ = unstructured.NestedString(u.Object, "spec", "issuerRef", "name")
			ref.Kind, _, _ = unstructured.NestedString(u.Object, "spec", "issuerRef", "kind")
			ref.Group, _, _ = unstructured.NestedString(u.Object, "spec", "issuerRef", "group")
			found = append(found, drive.Certificate{Key: u.GetNamespace() + "/" + u.GetName(), IssuerRef: ref, Labels: u.GetLabels(), Server: i})
			n++
		}
		if n == 0 {
			missing = append(missing, sc.Namespace+"/"+sc.Name)
		}
	}
	return found, missing, nil
}

// apply makes one write. Each is idempotent: an object that already is as
// the write wants it is not written.
func (c *Census) apply(ctx context.Context, w drive.Write, b v1alpha1.DriveBundle, oldCA, newCA side) error {
	switch w.Kind {
	case drive.SetIssuer:
		return c.setIssuer(ctx, w.Certificate, w.IssuerRef)
	case drive.AddNewCA:
		return c.addCA(ctx, b, newCA, oldCA)
	case drive.RemoveOldCA:
		return c.removeCA(ctx, b, oldCA)
	case drive.RemoveNewCA:
		return c.removeCA(ctx, b, newCA)
	}
	return nil
}

// setIssuer sets a cert-manager Certificate's issuerRef.
func (c *Census) setIssuer(ctx context.Context, cert string, to v1alpha1.IssuerRef) error {
	ns, name, _ := strings.Cut(cert, "/")
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(certificateGVK)
	if err := c.api.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		return fmt.Errorf("census: drive: reading Certificate %s: %w", cert, err)
	}
	want := map[string]any{"name": to.Name}
	if to.Kind != "" {
		want["kind"] = to.Kind
	}
	if to.Group != "" {
		want["group"] = to.Group
	}
	if got, _, _ := unstructured.NestedMap(u.Object, "spec", "issuerRef"); equality.Semantic.DeepEqual(got, want) {
		return nil
	}
	if err := unstructured.SetNestedMap(u.Object, want, "spec", "issuerRef"); err != nil {
		return fmt.Errorf("census: drive: Certificate %s: %w", cert, err)
	}
	if err := c.client.Update(ctx, u, client.FieldOwner(FieldManager)); err != nil {
		return fmt.Errorf("census: drive: switching the issuer of Certificate %s: %w", cert, err)
	}
	return nil
}

// emit records a decision's Events on the TrustRotation.
func (c *Census) emit(tr *v1alpha1.TrustRotation, events []drive.Event) {
	for _, e := range events {
		typ := corev1.EventTypeNormal
		if e.Warning {
			typ = corev1.EventTypeWarning
		}
		c.events.Event(tr, typ, e.Reason, e.Message)
	}
}

func earliestExpiry(certs []*x509.Certificate) time.Time {
	var t time.Time
	for _, c := range certs {
		if t.IsZero() || c.NotAfter.Before(t) {
			t = c.NotAfter
		}
	}
	return t
}

// drives reports whether tr is a rotation in mode Drive (whether or not
// this controller may take its steps: it says it may not in the status).
func (c *Census) drives(tr *v1alpha1.TrustRotation) bool {
	return tr.Spec.Mode == v1alpha1.ModeDrive && tr.Spec.Drive != nil
}

// readAtStart names the consumers whose hold on the rotation's objects
// nothing reports or serves: each must restart after the write that
// concerns it (a workload opted in to the rollout controller is rolled by
// it when the object changes).
//
// Unproven says whether the census proves the consumer holds what step
// (the driven rotation's current step) needs.
func readAtStart(r *core.Result, step string) []drive.ReadAtStart {
	var out []drive.ReadAtStart
	for _, k := range r.Consumers {
		s, f := v1alpha1.StepAddNewCA, k.TrustsOld
		if k.Object.Role == core.RoleServer {
			s, f = v1alpha1.StepSwitchServerCert, k.ServesNew
		}
		switch f.Evidence {
		case v1alpha1.EvidenceReported, v1alpha1.EvidenceServed, v1alpha1.EvidenceAcknowledged:
			continue
		}
		var need core.Fact
		want := core.Yes
		switch step {
		case v1alpha1.StepAddNewCA:
			need = k.TrustsNew
		case v1alpha1.StepSwitchServerCert:
			need = k.ServesNew
		case v1alpha1.StepRemoveOldCA:
			need, want = k.TrustsOld, core.No
		}
		proven := need.Value == want && (need.Evidence == v1alpha1.EvidenceRestarted || need.Evidence == v1alpha1.EvidenceReported ||
			need.Evidence == v1alpha1.EvidenceServed) || need.Evidence == v1alpha1.EvidenceAcknowledged
		out = append(out, drive.ReadAtStart{Step: s, Pod: k.Pod.Key(), Unproven: !proven,
			Consumer: fmt.Sprintf("pod %s/%s container %s (%s of %s)", k.Pod.Namespace, k.Pod.Name, k.Use.Container, k.Use.How, k.Object.Object)})
	}
	return out
}

// starting names the steps whose condition is not true only because
// containers have not started: every consumer the census does not prove
// for the step (or a step before it) is a container that is not running,
// and there is one.
func starting(r *core.Result, st *v1alpha1.TrustRotationStatus) map[string]bool {
	out := map[string]bool{}
	for i, step := range []string{v1alpha1.StepAddNewCA, v1alpha1.StepSwitchServerCert, v1alpha1.StepRemoveOldCA} {
		if c := meta.FindStatusCondition(st.Conditions, step); c == nil || c.Status == metav1.ConditionTrue {
			continue
		}
		waiting, running := false, false
		for _, k := range r.Consumers {
			needs := []core.Fact{k.ServesNew}
			if k.Object.Role != core.RoleServer {
				needs = []core.Fact{k.TrustsNew}
				if i == 2 {
					needs = append(needs, k.TrustsOld)
				}
			} else if i == 0 {
				continue
			}
			for j, f := range needs {
				want := core.Yes
				if j == 1 {
					want = core.No
				}
				if f.Evidence == v1alpha1.EvidenceAcknowledged || f.Value == want && (f.Evidence == v1alpha1.EvidenceRestarted ||
					f.Evidence == v1alpha1.EvidenceReported || f.Evidence == v1alpha1.EvidenceServed) {
					continue
				}
				if _, ok := k.Pod.StartedAt(k.Use.Container); ok {
					running = true
				} else {
					waiting = true
				}
			}
		}
		out[step] = waiting && !running
	}
	return out
}

// rollAfter is, per step, when a container that starts reads what the step
// wrote: the census saw it in every object (a trust-manager Bundle's
// targets change after the source the controller writes), plus the
// kubelet's delay. A step whose change some object does not show yet has
// no time: a restart then could read the old content.
func rollAfter(st *v1alpha1.TrustRotationStatus, delay time.Duration) map[string]time.Time {
	out := map[string]time.Time{}
	if t, ok := latestOf(st.Trust, func(o v1alpha1.TrustObjectStatus) *metav1.Time { return o.NewSince }); ok {
		out[v1alpha1.StepAddNewCA] = t.Add(delay)
	}
	if t, ok := latestOf(st.Trust, func(o v1alpha1.TrustObjectStatus) *metav1.Time { return o.OldGoneSince }); ok {
		out[v1alpha1.StepRemoveOldCA] = t.Add(delay)
	}
	if t, ok := latestOf(st.ServerCertificates, func(o v1alpha1.ServerCertificateStatus) *metav1.Time { return o.NewSince }); ok {
		out[v1alpha1.StepSwitchServerCert] = t.Add(delay)
	}
	return out
}

// latestOf is the latest of the items' dates; ok is false when there is
// none or one is missing.
func latestOf[T any](items []T, date func(T) *metav1.Time) (latest time.Time, ok bool) {
	for _, it := range items {
		t := date(it)
		if t == nil {
			return time.Time{}, false
		}
		if t.After(latest) {
			latest = t.Time
		}
	}
	return latest, !latest.IsZero()
}
