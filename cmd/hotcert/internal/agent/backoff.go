package agent

import (
	"math/rand/v2"
	"time"
)

// backoffState is an exponential backoff with "equal jitter": the n-th delay is
// drawn from [d/2, d] with d = min·2ⁿ capped at max, so agents that failed together
// spread out instead of retrying in lockstep.
type backoffState struct {
	min, max, cur time.Duration
}

func newBackoff(lo, hi time.Duration) *backoffState { return &backoffState{min: lo, max: hi} }

func (b *backoffState) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.min
	} else {
		b.cur = min(2*b.cur, b.max)
	}
	half := b.cur / 2
	return half + rand.N(b.cur-half+1)
}

func (b *backoffState) reset() { b.cur = 0 }
