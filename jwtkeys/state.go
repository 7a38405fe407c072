package jwtkeys

import (
	"slices"
	"sync/atomic"
	"time"
)

// retiredKey is a key that signed until a rotation and verifies until its grace
// period ends. Sources do not hold it any more: the KeySet remembers it.
type retiredKey struct {
	k            *key
	at, verifies time.Time // retired at; verifies until (exclusive)
}

// entry is how a state knows a key: until is zero for the signer and listed keys.
type entry struct {
	k     *key
	state KeyState
	until time.Time
}

// state is one immutable generation of a KeySet: the material in use plus the keys
// that rotations retired. Verification reads it through an atomic pointer.
type state struct {
	mat        *Material
	retired    []retiredKey // newest first; none of them is in mat
	byID       map[string]entry
	algs       []string             // every algorithm a key of the state is pinned to
	ended      []retiredKey         // retired keys whose grace period ended, newest first, at most maxEnded
	endedAt    map[string]time.Time // kid -> end of grace, for the keys of ended
	generation uint64

	jwks atomic.Pointer[jwksDoc] // cache, see jwks.go
}

// maxEnded bounds how many retired keys whose grace period ended a state
// remembers, so that their tokens are refused as key_retired rather than
// unknown_key. A token of an older key has expired anyway: the grace period
// outlasts every token's lifetime.
const maxEnded = 32

// newState builds the state that follows prev (nil for the first load) when m is
// published at now. The rules, documented in docs/jwt-keys.md:
//
//   - the keys of m (its signer and its listed keys) verify while m is in use;
//   - when the signer changes, the previous signer is retired at now and verifies
//     until now+grace, unless m lists it (then the listing keeps it, until removed);
//   - keys retired earlier keep their deadline unless m lists them or they passed it;
//   - any other key of prev that m does not hold (a listed key that was removed) is
//     dropped at once.
func newState(prev *state, m *Material, now time.Time, grace time.Duration) *state {
	s := &state{mat: m}
	inM := map[string]bool{m.signer.id: true}
	for _, k := range m.listed {
		inM[k.id] = true
	}
	if prev != nil {
		s.generation = prev.generation
		if old := prev.mat.signer; old.id != m.signer.id && !inM[old.id] {
			s.retired = append(s.retired, retiredKey{k: old, at: now, verifies: now.Add(grace)})
			inM[old.id] = true
		}
		var ended []retiredKey
		for _, r := range prev.retired {
			switch {
			case inM[r.k.id]:
			case now.Before(r.verifies):
				s.retired = append(s.retired, r)
				inM[r.k.id] = true
			default:
				ended = append(ended, r)
			}
		}
		s.ended = endedAfter(prev.ended, ended, inM)
	}
	s.generation++
	s.index()
	return s
}

// endedAfter returns the remembered ended keys once gone have ended too: gone first,
// without keys the new state holds, at most maxEnded.
func endedAfter(prev, gone []retiredKey, holds map[string]bool) []retiredKey {
	var out []retiredKey
	for _, r := range append(slices.Clone(gone), prev...) {
		if !holds[r.k.id] && len(out) < maxEnded {
			out = append(out, r)
		}
	}
	return out
}

// withoutExpired returns a copy of s without the retired keys whose grace ended at
// now, and the keys it dropped; s itself if none did.
func (s *state) withoutExpired(now time.Time) (*state, []retiredKey) {
	var keep, gone []retiredKey
	for _, r := range s.retired {
		if now.Before(r.verifies) {
			keep = append(keep, r)
		} else {
			gone = append(gone, r)
		}
	}
	if len(gone) == 0 {
		return s, nil
	}
	n := &state{mat: s.mat, retired: keep, generation: s.generation, ended: endedAfter(s.ended, gone, nil)}
	n.index()
	return n, gone
}

func (s *state) index() {
	s.endedAt = make(map[string]time.Time, len(s.ended))
	for _, r := range s.ended {
		s.endedAt[r.k.id] = r.verifies
	}
	s.byID = make(map[string]entry, 1+len(s.mat.listed)+len(s.retired))
	add := func(e entry) {
		s.byID[e.k.id] = e
		if !slices.Contains(s.algs, e.k.alg) {
			s.algs = append(s.algs, e.k.alg)
		}
	}
	add(entry{k: s.mat.signer, state: KeySigning})
	for _, k := range s.mat.listed {
		add(entry{k: k, state: KeyListed})
	}
	for _, r := range s.retired {
		add(entry{k: r.k, state: KeyRetired, until: r.verifies})
	}
}

// nextExpiry returns when the next retired key leaves its grace period (zero if none).
func (s *state) nextExpiry() time.Time {
	var t time.Time
	for _, r := range s.retired {
		if t.IsZero() || r.verifies.Before(t) {
			t = r.verifies
		}
	}
	return t
}

// keys describes every key of s that verifies at now: the signer, the listed keys in
// order, then the retired keys, newest first.
func (s *state) keys(now time.Time) []KeyInfo {
	out := s.mat.Keys()
	for _, r := range s.retired {
		if now.Before(r.verifies) {
			ki := info(r.k, KeyRetired)
			ki.RetiredAt, ki.VerifiesUntil = r.at, r.verifies
			out = append(out, ki)
		}
	}
	return out
}

// verifying returns the keys of s that verify at now, in the order of keys.
func (s *state) verifying(now time.Time) []*key {
	out := make([]*key, 0, 1+len(s.mat.listed)+len(s.retired))
	out = append(out, s.mat.signer)
	out = append(out, s.mat.listed...)
	for _, r := range s.retired {
		if now.Before(r.verifies) {
			out = append(out, r.k)
		}
	}
	return out
}
