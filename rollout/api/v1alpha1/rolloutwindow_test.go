package v1alpha1_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
)

// TestRolloutWindowsValidation: the API server accepts a recurring and an
// explicit window and reads them back as written; it refuses, with a clear
// message, a window that is neither or both, an end before its start, and a
// duration that is not a positive Go duration of at most a week.
func TestRolloutWindowsValidation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := metav1.NewTime(time.Date(2026, 12, 27, 22, 0, 0, 0, time.UTC))
	end := metav1.NewTime(start.Add(4 * time.Hour))
	rule := func(name string, ws ...v1alpha1.RolloutWindow) *v1alpha1.ReferenceRule {
		return &v1alpha1.ReferenceRule{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.ReferenceRuleSpec{
			Target: agent, Workloads: &v1alpha1.WorkloadRule{OwnerReferences: &v1alpha1.OwnerReferences{}}, RolloutWindows: ws}}
	}
	good := rule("windows-ok",
		v1alpha1.RolloutWindow{Schedule: "CRON_TZ=Europe/Berlin 0 2 * * SAT", Duration: "4h"},
		v1alpha1.RolloutWindow{Start: &start, End: &end})
	if err := env.Client().Create(ctx, good); err != nil {
		t.Fatal(err)
	}
	var got v1alpha1.ReferenceRule
	if err := env.Client().Get(ctx, client.ObjectKeyFromObject(good), &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Spec.RolloutWindows, good.Spec.RolloutWindows) {
		t.Fatalf("read back %+v, want %+v", got.Spec.RolloutWindows, good.Spec.RolloutWindows)
	}
	if s := got.Spec.RolloutWindows[0].String() + "; " + got.Spec.RolloutWindows[1].String(); s != "CRON_TZ=Europe/Berlin 0 2 * * SAT for 4h; 2026-12-27T22:00:00Z/2026-12-28T02:00:00Z" {
		t.Errorf("text form %q", s)
	}
	cp := got.DeepCopy()
	cp.Spec.RolloutWindows[1].Start.Time = time.Time{}
	if got.Spec.RolloutWindows[1].Start.IsZero() {
		t.Error("DeepCopy shares a window's start")
	}

	neither := "a window is either a schedule with a duration or a start with an end"
	for _, c := range []struct {
		name string
		w    v1alpha1.RolloutWindow
		want string
	}{
		{"empty", v1alpha1.RolloutWindow{}, neither},
		{"no-duration", v1alpha1.RolloutWindow{Schedule: "0 2 * * *"}, neither},
		{"both", v1alpha1.RolloutWindow{Schedule: "0 2 * * *", Duration: "1h", Start: &start, End: &end}, neither},
		{"no-end", v1alpha1.RolloutWindow{Start: &start}, neither},
		{"backwards", v1alpha1.RolloutWindow{Start: &end, End: &start}, "end must be after start"},
		{"days", v1alpha1.RolloutWindow{Schedule: "0 2 * * *", Duration: "1d"}, "duration must be a positive Go duration of at most 168h"},
		{"too-long", v1alpha1.RolloutWindow{Schedule: "0 2 * * *", Duration: "200h"}, "duration must be a positive Go duration of at most 168h"},
		{"zero", v1alpha1.RolloutWindow{Schedule: "0 2 * * *", Duration: "0s"}, "duration must be a positive Go duration of at most 168h"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := env.Client().Create(ctx, rule("windows-"+c.name, c.w))
			if err == nil {
				t.Fatalf("accepted; want refusal with %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("refused with\n  %v\nwant a message containing\n  %s", err, c.want)
			}
		})
	}
}
