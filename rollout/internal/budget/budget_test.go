package budget_test

import (
	"testing"
	"time"

	"github.com/hotcert/hotcert/rollout/internal/budget"
)

func TestBudget(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := budget.New(3, time.Minute)
	b.Observe("w0", now.Add(-30*time.Second), now) // a previous leader's rollout
	b.Observe("w0", now.Add(-30*time.Second), now) // seen twice, counted once
	b.Observe("old", now.Add(-2*time.Minute), now) // outside the window
	for i, w := range []string{"w1", "w2"} {
		if retry := b.Take(w, now.Add(time.Duration(i)*time.Second)); !retry.IsZero() {
			t.Fatalf("take %s refused until %v", w, retry)
		}
	}
	retry := b.Take("w3", now.Add(2*time.Second))
	if !retry.Equal(now.Add(30 * time.Second)) {
		t.Fatalf("retry = %v, want when w0's rollout leaves the window", retry)
	}
	if retry := b.Take("w3", now.Add(31*time.Second)); !retry.IsZero() {
		t.Fatalf("after the window, still refused until %v", retry)
	}
	if used := b.Used(now.Add(31 * time.Second)); used != 3 {
		t.Errorf("used = %d", used)
	}
	b.Release("w3", now.Add(31*time.Second))
	if used := b.Used(now.Add(31 * time.Second)); used != 2 {
		t.Errorf("used after release = %d", used)
	}
	if retry := budget.New(-1, time.Minute).Take("w", now); !retry.IsZero() {
		t.Error("unlimited budget refused")
	}
}
