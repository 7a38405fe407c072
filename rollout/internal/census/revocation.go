package census

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
)

// DenyReport is what one component of a pod's hotcert processes reports of
// the deny list it enforces: its <prefix>_tls_deny_list_info and
// <prefix>_tls_deny_list_denied_connections series.
type DenyReport struct {
	// Container is "" when the series do not name it.
	Container string
	Component string
	// Version is the version of the list it enforces ("" when only the
	// connections were reported).
	Version string
	// Denied counts its open connections the list denies; -1 when it does
	// not report them.
	Denied int
}

// RevocationInput is what one census of a revocation is made of.
type RevocationInput struct {
	// Objects and Pods are the census's: the consumers of a revocation are
	// the containers that use a trust object (RoleTrust): they verify peers.
	Objects []State
	Pods    []Pod
	// Reports are what each pod (by Pod.Key) reports of its deny lists.
	Reports map[string][]DenyReport
	// NoReports, when not "", says why no report could be read (no
	// Prometheus named, or it could not be queried): every consumer is then
	// unknown for that reason.
	NoReports string
	// Versions are the deny-list versions known to revoke every entry;
	// Current names the versions the deny-list objects hold now (for
	// messages).
	Versions map[string]bool
	Current  []string
	// Acknowledged returns why a person vouches for the pod ("" when none
	// does). Nil: none.
	Acknowledged func(Pod) string
	// MinConsumers keeps the revocation from being proven with fewer
	// consumers (and it never is with none).
	MinConsumers int
	// Broken names the deny-list objects that cannot be judged, each with
	// why; Unlisted the entries an object does not revoke ("ConfigMap a/b
	// (version v) does not revoke serial …"). Either keeps it unproven.
	Broken, Unlisted []string
}

// RevocationConsumer is one container consuming the trust, judged.
type RevocationConsumer struct {
	Pod       Pod
	Container string
	// Use is its first use of a trust object (for the straggler's object
	// and how).
	Use Use
	// Evidence is v1alpha1.EvidenceReported, EvidenceUnknown or
	// EvidenceAcknowledged; State a v1alpha1.Revocation* state.
	Evidence, State string
	// Denied sums the open connections its components' lists deny.
	Denied int
	Reason string
}

// RevocationResult is one census of a revocation.
type RevocationResult struct {
	// Consumers are sorted by namespace, pod and container.
	Consumers []RevocationConsumer
	Counts    v1alpha1.RevocationCounts
	// Stragglers are the consumers that keep it unproven, at most
	// v1alpha1.MaxStragglers; Omitted counts the rest.
	Stragglers []v1alpha1.Straggler
	Omitted    int
	// Proven: every consumer refuses every entry with no connection left (or
	// is acknowledged), and there are enough of them. Otherwise Reason (a
	// v1alpha1 Reason*) and Message say why not; Message names the
	// stragglers.
	Proven          bool
	Reason, Message string
}

// TakeRevocation judges every consumer of the trust in in.
func TakeRevocation(in RevocationInput) RevocationResult {
	var r RevocationResult
	r.Consumers = make([]RevocationConsumer, 0, len(in.Pods)) // at least one per pod, mostly
	for _, p := range in.Pods {
		ack := ""
		if in.Acknowledged != nil {
			ack = in.Acknowledged(p)
		}
		var seen []string
		for _, u := range p.Uses {
			if in.Objects[u.Object].Role != RoleTrust || slices.Contains(seen, u.Container) {
				continue
			}
			seen = append(seen, u.Container)
			c := RevocationConsumer{Pod: p, Container: u.Container, Use: u}
			in.judge(&c, ack)
			r.Consumers = append(r.Consumers, c)
		}
	}
	slices.SortFunc(r.Consumers, func(a, b RevocationConsumer) int {
		return cmp.Or(cmp.Compare(a.Pod.Namespace, b.Pod.Namespace), cmp.Compare(a.Pod.Name, b.Pod.Name), cmp.Compare(a.Container, b.Container))
	})
	r.count()
	r.verdict(in)
	return r
}

// judge judges one consumer.
func (in *RevocationInput) judge(c *RevocationConsumer, ack string) {
	c.Evidence, c.State = v1alpha1.EvidenceUnknown, v1alpha1.RevocationUnknown
	if ack != "" {
		c.Evidence, c.State, c.Reason = v1alpha1.EvidenceAcknowledged, "", "acknowledged: "+ack
		return
	}
	if in.NoReports != "" {
		c.Reason = in.NoReports
		return
	}
	reps, why := in.reports(c.Pod, c.Container)
	if len(reps) == 0 {
		c.Reason = cmp.Or(why, "reports no deny list (hotcert_tls_deny_list_info): whether it refuses the revoked certificates is not known")
		return
	}
	c.Evidence = v1alpha1.EvidenceReported
	var versions []string
	silent := false
	for _, d := range reps {
		if !in.Versions[d.Version] {
			c.State = v1alpha1.RevocationNotRefused
			c.Reason = fmt.Sprintf("enforces deny list %s (component %s), which the census has not seen revoke every entry (an older list, or one read from other keys or objects)", cmp.Or(d.Version, "(none)"), d.Component)
			if len(in.Current) > 0 {
				c.Reason += fmt.Sprintf("; the deny-list objects hold %s", strings.Join(in.Current, ", "))
			}
			return
		}
		if d.Denied < 0 {
			silent = true
		} else {
			c.Denied += d.Denied
		}
		if !slices.Contains(versions, d.Version) {
			versions = append(versions, d.Version)
		}
	}
	list := "deny list " + strings.Join(versions, ", ")
	switch {
	case c.Denied > 0:
		c.State = v1alpha1.RevocationConnectionsLeft
		c.Reason = fmt.Sprintf("refuses every entry (%s), but %d open connections its list denies are left", list, c.Denied)
	case silent:
		c.State = v1alpha1.RevocationConnectionsLeft
		c.Reason = fmt.Sprintf("refuses every entry (%s), but does not report its open connections (hotcert_tls_deny_list_denied_connections)", list)
	default:
		c.State = v1alpha1.RevocationRefused
		c.Reason = fmt.Sprintf("refuses every entry (%s), no connection it denies is open", list)
	}
}

// reports returns the deny lists that speak for container's process: the
// pod's reports naming the container, or those naming no container when it
// is the only container of the pod that consumes the trust (as
// Input.report does for the rotation's reports).
func (in *RevocationInput) reports(p Pod, container string) ([]DenyReport, string) {
	var own, anon []DenyReport
	for _, d := range in.Reports[p.Key()] {
		switch d.Container {
		case container:
			own = append(own, d)
		case "":
			anon = append(anon, d)
		}
	}
	if len(own) > 0 || len(anon) == 0 {
		return own, ""
	}
	for _, u := range p.Uses {
		if u.Container != container && in.Objects[u.Object].Role == RoleTrust {
			return nil, "its pod reports its deny list without naming the container, and more than one of its containers consumes the trust"
		}
	}
	return anon, ""
}

// count fills in r.Counts.
func (r *RevocationResult) count() {
	pods := map[string]bool{}
	c := &r.Counts
	for _, k := range r.Consumers {
		pods[k.Pod.Key()] = true
		c.Total++
		switch k.Evidence {
		case v1alpha1.EvidenceReported:
			c.ByEvidence.Reported++
		case v1alpha1.EvidenceAcknowledged:
			c.ByEvidence.Acknowledged++
		default:
			c.ByEvidence.Unknown++
		}
		switch k.State {
		case v1alpha1.RevocationRefused:
			c.ByState.Refused++
		case v1alpha1.RevocationConnectionsLeft:
			c.ByState.ConnectionsLeft++
		case v1alpha1.RevocationNotRefused:
			c.ByState.NotRefused++
		}
		c.DeniedConnections += int32(k.Denied)
	}
	c.Pods = int32(len(pods))
}

// verdict decides whether the revocation is proven, and names what is not.
func (r *RevocationResult) verdict(in RevocationInput) {
	var b blockers
	var pending, unknown int
	for _, k := range r.Consumers {
		if k.Evidence == v1alpha1.EvidenceAcknowledged || k.State == v1alpha1.RevocationRefused {
			continue
		}
		if k.Evidence == v1alpha1.EvidenceUnknown {
			unknown++
		} else {
			pending++
		}
		if b.keeps() {
			b.first = append(b.first, v1alpha1.Straggler{Namespace: k.Pod.Namespace, Pod: k.Pod.Name, Container: k.Container,
				Object: in.Objects[k.Use.Object].String(), How: string(k.Use.How), Evidence: k.Evidence,
				Step: v1alpha1.ConditionRevocationEnforced, Reason: k.Reason})
		}
	}
	// Those whose state is known come first: they are moving.
	slices.SortStableFunc(b.first, func(x, y v1alpha1.Straggler) int {
		return cmp.Compare(boolInt(x.Evidence == v1alpha1.EvidenceUnknown), boolInt(y.Evidence == v1alpha1.EvidenceUnknown))
	})
	r.Stragglers, r.Omitted = b.first, b.total-len(b.first)
	total := len(r.Consumers)
	switch {
	case len(in.Broken) > 0:
		r.Reason, r.Message = v1alpha1.ReasonInvalid, "the deny lists cannot be judged: "+strings.Join(in.Broken, "; ")
	case len(in.Unlisted) > 0:
		r.Reason, r.Message = v1alpha1.ReasonNotListed, strings.Join(in.Unlisted, "; ")
	case total == 0:
		r.Reason, r.Message = v1alpha1.ReasonInProgress, "no consumer of the trust found: an empty fleet proves nothing"
	case total < in.MinConsumers:
		r.Reason, r.Message = v1alpha1.ReasonInProgress, fmt.Sprintf("%d consumers found, fewer than minConsumers (%d)", total, in.MinConsumers)
	case pending > 0:
		r.Reason, r.Message = v1alpha1.ReasonInProgress, fmt.Sprintf("%d of %d consumers not proven: %s", b.total, total, b.names())
	case unknown > 0:
		r.Reason, r.Message = v1alpha1.ReasonUnproven, fmt.Sprintf("%d of %d consumers report nothing that proves it (restart them onto a hotcert build that reports its deny list, or acknowledge them): %s",
			unknown, total, b.names())
	default:
		r.Proven, r.Reason = true, v1alpha1.ReasonDone
		r.Message = fmt.Sprintf("refused by all %d consumers (%d reported, %d acknowledged) and no connection their lists deny is left",
			total, r.Counts.ByEvidence.Reported, r.Counts.ByEvidence.Acknowledged)
	}
	r.Message = truncate(r.Message, maxMessage)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
