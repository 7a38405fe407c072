package census

import (
	"fmt"
	"time"

	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
)

// Tri is a yes/no answer that may not be known.
type Tri int

const (
	Unknown Tri = iota
	Yes
	No
)

func tri(b bool) Tri {
	if b {
		return Yes
	}
	return No
}

// Fact is one answer about a consumer, with its evidence (a v1alpha1
// Evidence* class) and, when it is not a proven Yes for what a step needs,
// why.
type Fact struct {
	Value    Tri
	Evidence string
	Why      string
}

// proven reports whether the evidence proves the fact.
func (f Fact) proven() bool {
	switch f.Evidence {
	case v1alpha1.EvidenceReported, v1alpha1.EvidenceServed, v1alpha1.EvidenceRestarted, v1alpha1.EvidenceAcknowledged:
		return true
	}
	return false
}

// is reports whether the fact is proven to be v, or acknowledged.
func (f Fact) is(v Tri) bool {
	return f.Evidence == v1alpha1.EvidenceAcknowledged || (f.Value == v && f.proven())
}

// Consumer is one container's use of one object, and what is known of it.
type Consumer struct {
	Pod    Pod
	Use    Use
	Object State
	// For a trust consumer: whether it trusts the new CA, and the old one.
	TrustsNew, TrustsOld Fact
	// For a server: whether it serves a leaf issued by the new CA.
	ServesNew Fact
	// Acknowledged is why a person vouches for it ("" when none does).
	Acknowledged string
}

// explain says whether a judgement says why (Fact.Why): a census says it
// only of the stragglers it shows, judging them again (judging is pure).
type explain bool

// why is say() when e, else "". say does not escape: the closures passed
// to it are not allocated.
func (e explain) why(say func() string) string {
	if !e {
		return ""
	}
	return say()
}

// judge finds out what consumer c holds; with e, why each fact is not
// proven.
func (in *Input) judge(c *Consumer, e explain) {
	if c.Object.Role == RoleServer {
		c.ServesNew = in.servesNew(c, e)
	} else {
		c.TrustsNew, c.TrustsOld = in.trusts(c, e)
	}
	if c.Acknowledged != "" {
		why := e.why(func() string { return "acknowledged: " + c.Acknowledged })
		c.TrustsNew = Fact{Value: c.TrustsNew.Value, Evidence: v1alpha1.EvidenceAcknowledged, Why: why}
		c.TrustsOld = Fact{Value: c.TrustsOld.Value, Evidence: v1alpha1.EvidenceAcknowledged, Why: why}
		c.ServesNew = Fact{Value: c.ServesNew.Value, Evidence: v1alpha1.EvidenceAcknowledged, Why: why}
	}
}

// report returns the report that speaks for container c's process: the
// pod's report naming the container, or the one naming no container when c
// is the only container of the pod that consumes an object (nil when none
// does: a report that cannot be told apart proves nothing of c).
func (in *Input) report(p Pod, container string, wants func(Report) bool) (*Report, string) {
	var anon *Report
	for i, r := range in.Reports[p.Key()] {
		if !wants(r) {
			continue
		}
		if r.Container == container {
			return &in.Reports[p.Key()][i], ""
		}
		if r.Container == "" {
			anon = &in.Reports[p.Key()][i]
		}
	}
	if anon == nil {
		return nil, ""
	}
	for _, u := range p.Uses {
		if u.Container != container {
			return nil, "its pod reports without naming the container, and more than one of its containers consumes the objects"
		}
	}
	return anon, ""
}

// delay is how long the kubelet can take to deliver a change of the
// object to a container that starts.
func (in *Input) delay(u Use) time.Duration {
	if u.How == HowClusterTrustBundle {
		return in.CTBDelay
	}
	return in.VolumeDelay
}

// startedAfter reports whether container c started at least the
// propagation delay after since (zero since: never).
func (in *Input) startedAfter(c *Consumer, since time.Time) bool {
	start, ok := c.Pod.StartedAt(c.Use.Container)
	return ok && !since.IsZero() && !start.Before(since.Add(in.delay(c.Use)))
}

// trusts answers whether trust consumer c trusts the new CA and the old one.
func (in *Input) trusts(c *Consumer, e explain) (trustsNew, trustsOld Fact) {
	if r, why := in.report(c.Pod, c.Use.Container, func(r Report) bool { return len(r.CAs) > 0 }); r != nil {
		n, o := hasAny(r.CAs, in.NewCA.SHA256), hasAny(r.CAs, in.OldCA.SHA256)
		trustsNew = Fact{Value: tri(n), Evidence: v1alpha1.EvidenceReported}
		if !n {
			trustsNew.Why = e.why(func() string { return "reports a bundle without " + in.NewCA.Name })
		}
		trustsOld = Fact{Value: tri(o), Evidence: v1alpha1.EvidenceReported}
		if o {
			trustsOld.Why = e.why(func() string { return "reports a bundle that still holds " + in.OldCA.Name })
		}
		return trustsNew, trustsOld
	} else if why != "" {
		u := Fact{Evidence: v1alpha1.EvidenceUnknown, Why: why}
		return u, u
	}
	o := &c.Object
	if _, running := c.Pod.StartedAt(c.Use.Container); !running {
		u := Fact{Evidence: v1alpha1.EvidenceUnknown, Why: "its container is not running"}
		return u, u
	}
	// What it read at start: what the object held, if it started after
	// every change the census saw could reach it.
	switch {
	case !o.HoldsNew:
		trustsNew = Fact{Value: No, Evidence: in.readAtStart(c, time.Time{}), Why: e.why(func() string { return fmt.Sprintf("%s does not hold %s", o.Object, in.NewCA.Name) })}
	case in.startedAfter(c, o.NewSince):
		trustsNew = Fact{Value: Yes, Evidence: v1alpha1.EvidenceRestarted}
	default:
		trustsNew = in.notSince(c, o.NewSince, e, func() string { return in.NewCA.Name + " was added to " + o.Object.String() })
	}
	stillOld := func() string { return fmt.Sprintf("%s still holds %s", o.Object, in.OldCA.Name) }
	switch {
	case o.HoldsOld && in.startedAfter(c, o.NewSince):
		trustsOld = Fact{Value: Yes, Evidence: v1alpha1.EvidenceRestarted, Why: e.why(stillOld)}
	case o.HoldsOld:
		trustsOld = Fact{Value: Yes, Evidence: in.readAtStart(c, o.NewSince), Why: e.why(stillOld)}
	case in.startedAfter(c, o.OldGoneSince):
		trustsOld = Fact{Value: No, Evidence: v1alpha1.EvidenceRestarted}
	default:
		trustsOld = in.notSince(c, o.OldGoneSince, e, func() string { return in.OldCA.Name + " was removed from " + o.Object.String() })
	}
	return trustsNew, trustsOld
}

// readAtStart is the evidence class of what a consumer that reports nothing
// read at start: restarted when it started after the change at since could
// reach it (or since is zero), else never for subPath and env, unknown for
// the rest.
func (in *Input) readAtStart(c *Consumer, since time.Time) string {
	switch {
	case since.IsZero() || in.startedAfter(c, since):
		return v1alpha1.EvidenceRestarted
	case !c.Use.How.updated():
		return v1alpha1.EvidenceNever
	}
	return v1alpha1.EvidenceUnknown
}

// notSince is the fact about a consumer that reports nothing and started
// before a change the census saw at since (happened: "CA-2026 was added to
// …") could reach it: through subPath or env it still holds what it read at
// start (never), through a volume it may have reloaded the file or not
// (unknown). Either way what it holds is not known.
func (in *Input) notSince(c *Consumer, since time.Time, e explain, happened func() string) Fact {
	f := Fact{Evidence: v1alpha1.EvidenceUnknown}
	if !c.Use.How.updated() {
		f.Evidence = v1alpha1.EvidenceNever
	}
	f.Why = e.why(func() string {
		at, _ := c.Pod.StartedAt(c.Use.Container)
		start := at.UTC().Format(time.RFC3339)
		when := fmt.Sprintf("%s (seen at %s; the kubelet takes up to %s)", happened(), since.UTC().Format(time.RFC3339), in.delay(c.Use))
		switch c.Use.How {
		case HowSubPath:
			return fmt.Sprintf("mounts it with subPath, which is never updated, and started at %s, before %s: restart it", start, when)
		case HowEnv:
			return fmt.Sprintf("reads it from env, which is never updated, and started at %s, before %s: restart it", start, when)
		}
		return fmt.Sprintf("reports nothing, and started at %s, before %s: it may have reloaded it or not; restart it, or let it report (hotcert metrics)", start, when)
	})
	return f
}

// servesNew answers whether server consumer c serves a leaf issued by the
// new CA: from a handshake to it (served), else from its report, else from
// its start time.
func (in *Input) servesNew(c *Consumer, e explain) Fact {
	if f, ok := in.served(c, e); ok {
		return f
	}
	if r, why := in.report(c.Pod, c.Use.Container, func(r Report) bool { return len(r.Leaves) > 0 }); r != nil {
		for _, l := range r.Leaves {
			if (c.Object.HoldsNew && l.SHA256 == c.Object.LeafSHA256) || in.NewCA.Subjects[l.Issuer] {
				return Fact{Value: Yes, Evidence: v1alpha1.EvidenceReported}
			}
		}
		return Fact{Value: No, Evidence: v1alpha1.EvidenceReported, Why: e.why(func() string { return "reports a leaf not issued by " + in.NewCA.Name })}
	} else if why != "" {
		return Fact{Evidence: v1alpha1.EvidenceUnknown, Why: why}
	}
	o := &c.Object
	if _, running := c.Pod.StartedAt(c.Use.Container); !running {
		return Fact{Evidence: v1alpha1.EvidenceUnknown, Why: "its container is not running"}
	}
	switch {
	case !o.HoldsNew:
		return Fact{Value: No, Evidence: in.readAtStart(c, time.Time{}), Why: e.why(func() string { return fmt.Sprintf("%s does not hold a leaf issued by %s", o.Object, in.NewCA.Name) })}
	case in.startedAfter(c, o.NewSince):
		return Fact{Value: Yes, Evidence: v1alpha1.EvidenceRestarted}
	}
	return in.notSince(c, o.NewSince, e, func() string { return "a leaf issued by " + in.NewCA.Name + " was put in " + o.Object.String() })
}

// served is what the handshakes to c's pod showed (ok false when none
// completed): a leaf issued by the new CA that names the server name on
// every endpoint that answered, or the first endpoint that serves another.
func (in *Input) served(c *Consumer, e explain) (Fact, bool) {
	ok := false
	for _, s := range in.Served[c.Pod.Key()] {
		if s.Err != "" {
			continue
		}
		ok = true
		switch {
		case s.IssuedByNew && !s.HostnameOK:
			return Fact{Value: No, Evidence: v1alpha1.EvidenceServed, Why: e.why(func() string {
				return fmt.Sprintf("serves on %s a leaf issued by %s that does not name the server name (serial %s)", s.Endpoint, in.NewCA.Name, s.Serial)
			})}, true
		case s.IssuedByNew:
		case s.IssuedByOld:
			return Fact{Value: No, Evidence: v1alpha1.EvidenceServed, Why: e.why(func() string {
				return fmt.Sprintf("still serves on %s a leaf issued by %s (serial %s)", s.Endpoint, in.OldCA.Name, s.Serial)
			})}, true
		default:
			return Fact{Value: No, Evidence: v1alpha1.EvidenceServed, Why: e.why(func() string {
				return fmt.Sprintf("serves on %s a leaf issued by neither %s nor %s (serial %s)", s.Endpoint, in.OldCA.Name, in.NewCA.Name, s.Serial)
			})}, true
		}
	}
	return Fact{Value: Yes, Evidence: v1alpha1.EvidenceServed}, ok
}

func hasAny(set, of map[string]bool) bool {
	for k := range of {
		if set[k] {
			return true
		}
	}
	return false
}
