package census

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
)

// The census vouches only for what it saw: the time a trust object or server
// certificate was first seen holding the new CA (or without the old one) is
// kept in the TrustRotation's status, so that it survives restarts, and a
// container is judged to have read the change at start only if it started at
// least the kubelet's delay after that time. An object already changed when
// the census first looks is dated then: later than the truth, never earlier.

// TrackTrust dates the trust objects read now. names are the spec.trust
// entries' names (TrustObjectStatus.Object), prev the previous status (its
// dates kept for an entry of the same name that still holds). It sets the
// dates of each state of role RoleTrust and returns the new status entries,
// one per name: an entry's dates are set once every object it expands to
// (at least one, all read) holds the new CA, or none holds the old one. An
// object that holds the new CA before its whole entry does is dated now,
// every census, so that it proves nothing yet.
func TrackTrust(names []string, prev []v1alpha1.TrustObjectStatus, states []State, now time.Time) []v1alpha1.TrustObjectStatus {
	old := map[string]v1alpha1.TrustObjectStatus{}
	for _, p := range prev {
		old[p.Object] = p
	}
	out := make([]v1alpha1.TrustObjectStatus, len(names))
	for i, name := range names {
		st := v1alpha1.TrustObjectStatus{Object: name}
		for _, s := range states {
			if s.Role != RoleTrust || s.Origin != i {
				continue
			}
			st.Objects++
			switch {
			case s.Err != "":
				if st.Error == "" {
					st.Error = s.Object.String() + ": " + s.Err
				}
			default:
				if s.HoldsNew {
					st.HoldNew++
				}
				if s.HoldsOld {
					st.HoldOld++
				}
			}
		}
		read := st.Objects > 0 && st.Error == ""
		p := old[name]
		if read && st.HoldNew == st.Objects {
			st.NewSince = since(p.NewSince, now)
		}
		if read && st.HoldOld == 0 {
			st.OldGoneSince = since(p.OldGoneSince, now)
		}
		for j := range states {
			s := &states[j]
			if s.Role != RoleTrust || s.Origin != i || s.Err != "" {
				continue
			}
			s.NewSince, s.OldGoneSince = time.Time{}, time.Time{}
			if s.HoldsNew {
				s.NewSince = dated(st.NewSince, now)
			}
			if !s.HoldsOld {
				s.OldGoneSince = dated(st.OldGoneSince, now)
			}
		}
		out[i] = st
	}
	return out
}

// TrackServers dates the server certificates read now, as TrackTrust does
// (one state per spec.serverCertificates entry naming a Secret, of role
// RoleServer; names are their Secrets, "namespace/name"). An entry naming a
// signer (signers[i] != "") has one state per pod projecting its pod
// certificate, each dated by whoever read it (the census, when it first saw
// the PodCertificateRequest issued): its status counts them.
func TrackServers(names, signers []string, prev []v1alpha1.ServerCertificateStatus, states []State, now time.Time) []v1alpha1.ServerCertificateStatus {
	old := map[string]v1alpha1.ServerCertificateStatus{}
	for _, p := range prev {
		old[p.Secret] = p
	}
	out := make([]v1alpha1.ServerCertificateStatus, len(names))
	for i, name := range names {
		if signers[i] != "" {
			st := v1alpha1.ServerCertificateStatus{SignerName: signers[i]}
			for _, s := range states {
				if s.Role != RoleServer || s.Origin != i {
					continue
				}
				st.Pods++
				switch {
				case s.Err != "":
				case s.HoldsNew:
					st.HoldNew++
				}
			}
			out[i] = st
			continue
		}
		st := v1alpha1.ServerCertificateStatus{Secret: name, Error: "not read"}
		for j := range states {
			s := &states[j]
			if s.Role != RoleServer || s.Origin != i {
				continue
			}
			st.Error = s.Err
			s.NewSince = time.Time{}
			if s.Err != "" {
				break
			}
			st.SHA256, st.Serial = s.LeafSHA256, s.LeafSerial
			switch {
			case s.HoldsNew:
				st.IssuedBy = "new"
				st.NewSince = since(old[name].NewSince, now)
				s.NewSince = st.NewSince.Time
			case s.HoldsOld:
				st.IssuedBy = "old"
			default:
				st.IssuedBy = "neither"
			}
			break
		}
		out[i] = st
	}
	return out
}

// since keeps a previous date, or dates now, rounded up to the second the
// status keeps (a date is never earlier than the sighting).
func since(prev *metav1.Time, now time.Time) *metav1.Time {
	if prev != nil {
		return prev.DeepCopy()
	}
	t := metav1.NewTime(SeenAt(now))
	return &t
}

// SeenAt is the date of a sighting at now: rounded up to the second that
// statuses (and containers' start times) keep, so that it is never earlier
// than the sighting.
func SeenAt(now time.Time) time.Time {
	up := now.Truncate(time.Second)
	if up.Before(now) {
		up = up.Add(time.Second)
	}
	return up
}

func dated(t *metav1.Time, now time.Time) time.Time {
	if t == nil {
		return now
	}
	return t.Time
}
