package census

import (
	"context"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/revocation"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
	core "github.com/hotcert/hotcert/rollout/internal/census"
	"github.com/hotcert/hotcert/rollout/internal/census/evidence"
)

// revoke takes the census of tr's spec.revocation into st: what the deny-list
// objects hold, what every consumer of the trust (objects and pods are the
// rotation census's) reports enforcing, read with one Prometheus query, and
// the RevocationEnforced condition. Without spec.revocation it clears both.
func (c *Census) revoke(ctx context.Context, tr *v1alpha1.TrustRotation, st *v1alpha1.TrustRotationStatus, objects []core.State, pods []core.Pod,
	cas []side, now time.Time) {
	spec := tr.Spec.Revocation
	if spec == nil {
		c.dropRevocation(tr, st)
		return
	}
	entries, err := parseEntries(spec)
	if err != nil {
		c.revocationInvalid(tr, st, err.Error(), now)
		return
	}
	rs := &v1alpha1.RevocationStatus{Entries: make([]v1alpha1.RevocationEntryStatus, len(entries))}
	for i, e := range entries {
		rs.Entries[i] = v1alpha1.RevocationEntryStatus{Entry: e.name, Listed: true}
	}
	lists := readDenyLists(ctx, c.api, spec.DenyLists, trustOf(cas), now)
	rs.Versions = rememberedVersions(tr.Status.Revocation, rs.Entries)
	var current, broken, unlisted []string
	for _, l := range lists {
		ds := v1alpha1.DenyListObjectStatus{Object: l.object, Error: l.err}
		if l.err != "" {
			broken = append(broken, l.object+": "+l.err)
		} else {
			ds.Version, ds.RevokesAll = l.list.Version(), true
			for i, e := range entries {
				if !e.on(l.list) {
					ds.RevokesAll, rs.Entries[i].Listed = false, false
					unlisted = append(unlisted, fmt.Sprintf("%s (version %s) does not revoke %s", l.object, ds.Version, e.name))
				}
			}
			if !slices.Contains(current, ds.Version) {
				current = append(current, ds.Version)
			}
			if ds.RevokesAll && !slices.Contains(rs.Versions, ds.Version) {
				rs.Versions = append([]string{ds.Version}, rs.Versions...)
			}
		}
		rs.DenyLists = append(rs.DenyLists, ds)
	}
	if len(rs.Versions) > v1alpha1.MaxRevocationVersions {
		rs.Versions = rs.Versions[:v1alpha1.MaxRevocationVersions]
	}
	in := core.RevocationInput{Objects: objects, Pods: pods, Versions: map[string]bool{}, Current: current,
		Acknowledged: acknowledged(tr.Spec.Acknowledged), MinConsumers: int(tr.Spec.MinConsumers), Broken: broken, Unlisted: unlisted}
	for _, v := range rs.Versions {
		in.Versions[v] = true
	}
	in.Reports, in.NoReports = c.denyReports(ctx, tr)
	r := core.TakeRevocation(in)
	rs.Consumers, rs.Stragglers, rs.StragglersOmitted = r.Counts, r.Stragglers, int32(r.Omitted)
	rs.Summary = "revocation not proven: " + r.Message
	if r.Proven {
		rs.Summary = "revocation enforced: " + r.Message
	}
	st.Revocation = rs
	st.Conditions = setCondition(st.Conditions, v1alpha1.ConditionRevocationEnforced, r.Proven, r.Reason, r.Message, tr.Generation, now)
	c.metrics.revocation.observe(tr.Name, r, r.Proven)
}

// revocationInvalid sets RevocationEnforced False, Invalid, when tr has a
// revocation that cannot be judged (its rotation, or its own spec, cannot be
// acted on).
func (c *Census) revocationInvalid(tr *v1alpha1.TrustRotation, st *v1alpha1.TrustRotationStatus, msg string, now time.Time) {
	if tr.Spec.Revocation == nil {
		c.dropRevocation(tr, st)
		return
	}
	st.Revocation = &v1alpha1.RevocationStatus{Summary: "revocation not proven: " + msg}
	st.Conditions = setCondition(st.Conditions, v1alpha1.ConditionRevocationEnforced, false, v1alpha1.ReasonInvalid, msg, tr.Generation, now)
	c.metrics.revocation.observe(tr.Name, core.RevocationResult{}, false)
}

// dropRevocation removes what a revocation left in st, once spec.revocation
// is gone.
func (c *Census) dropRevocation(tr *v1alpha1.TrustRotation, st *v1alpha1.TrustRotationStatus) {
	st.Revocation = nil
	meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionRevocationEnforced)
	c.metrics.revocation.forget(tr.Name)
}

// denyReports reads what every pod reports of its deny lists, with one query
// to the rotation's Prometheus; the string says why there are no reports.
func (c *Census) denyReports(ctx context.Context, tr *v1alpha1.TrustRotation) (map[string][]core.DenyReport, string) {
	p := tr.Spec.Evidence.Prometheus
	if p == nil {
		return nil, "the rotation names no Prometheus (spec.evidence.prometheus), where the census reads the deny list each process enforces"
	}
	q := evidence.Prometheus{URL: p.URL, Client: c.opts.prometheusClient(p.URL), NamespaceLabel: p.NamespaceLabel, PodLabel: p.PodLabel,
		ContainerLabel: p.ContainerLabel, Prefix: p.MetricPrefix}
	reps, err := q.DenyLists(ctx)
	if err != nil {
		log.FromContext(ctx).Info("census: deny lists could not be read", "rotation", tr.Name, "error", err.Error())
		return nil, "the deny lists consumers report could not be read: " + err.Error()
	}
	return reps, ""
}

// entry is one entry of spec.revocation.
type entry struct {
	name   string // as a deny-list line names it
	issuer hotcert.Fingerprint
	serial *big.Int // nil: an SPKI entry
	spki   [32]byte
}

// on reports whether l revokes e.
func (e entry) on(l *revocation.List) bool {
	if e.serial != nil {
		return l.RevokesSerialOf(e.issuer, e.serial)
	}
	return l.DeniesSPKI(e.spki)
}

// parseEntries reads the entries of spec (the CRD's rules already checked
// their form).
func parseEntries(spec *v1alpha1.RevocationSpec) ([]entry, error) {
	var out []entry
	for _, s := range spec.Serials {
		n, ok := new(big.Int).SetString(strings.ReplaceAll(s.Serial, ":", ""), 16)
		if !ok || n.Sign() < 0 {
			return nil, fmt.Errorf("revocation serial %q is not hex", s.Serial)
		}
		fp, err := hotcert.ParseFingerprint(s.Issuer)
		if err != nil {
			return nil, fmt.Errorf("revocation serial %s: issuer: %w", s.Serial, err)
		}
		out = append(out, entry{name: fmt.Sprintf("serial %s issuer %s", hotcert.FormatSerial(n), fp), issuer: fp, serial: n})
	}
	for _, s := range spec.SPKI {
		h, err := hotcert.ParseFingerprint(s)
		if err != nil {
			return nil, fmt.Errorf("revocation spki: %w", err)
		}
		out = append(out, entry{name: "spki " + h.String(), spki: h})
	}
	return out, nil
}

// rememberedVersions are the versions the last census saw revoke every entry,
// if it judged the same entries (a changed entry forgets them all).
func rememberedVersions(prev *v1alpha1.RevocationStatus, entries []v1alpha1.RevocationEntryStatus) []string {
	if prev == nil || len(prev.Entries) != len(entries) {
		return nil
	}
	for i := range entries {
		if prev.Entries[i].Entry != entries[i].Entry {
			return nil
		}
	}
	return slices.Clone(prev.Versions)
}

// Event reasons of a revocation, on the TrustRotation.
const (
	// EventRevocationEnforced (Normal): RevocationEnforced became True.
	EventRevocationEnforced = "RevocationEnforced"
	// EventRevocationNotEnforced (Warning): it was True and no longer is (a
	// new consumer that reports nothing, a list that dropped an entry, a
	// connection of a revoked certificate).
	EventRevocationNotEnforced = "RevocationNotEnforced"
)

// revocationEvents records an Event on obj when RevocationEnforced changed
// between prev and st.
func (c *Census) revocationEvents(obj *v1alpha1.TrustRotation, prev, st *v1alpha1.TrustRotationStatus) {
	now := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionRevocationEnforced)
	was := meta.FindStatusCondition(prev.Conditions, v1alpha1.ConditionRevocationEnforced)
	wasTrue := was != nil && was.Status == metav1.ConditionTrue
	switch {
	case now != nil && now.Status == metav1.ConditionTrue && !wasTrue:
		c.events.Event(obj, eventType(true), EventRevocationEnforced, "revocation enforced: "+now.Message)
	case wasTrue && (now == nil || now.Status != metav1.ConditionTrue):
		msg := "spec.revocation removed"
		if now != nil {
			msg = now.Message
		}
		c.events.Event(obj, eventType(false), EventRevocationNotEnforced, "revocation no longer proven: "+msg)
	}
}
