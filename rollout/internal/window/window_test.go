package window

import (
	"strings"
	"testing"
	"time"
)

func mustParse(t *testing.T, text string) Set {
	t.Helper()
	s, err := Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func at(t *testing.T, zone, local string) time.Time {
	t.Helper()
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	v, err := time.ParseInLocation("2006-01-02 15:04", local, loc)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestRecurringInTimeZone: a Saturday 02:00 Europe/Berlin window for 4h is
// open from 02:00 to 06:00 Berlin time (01:00 to 05:00 UTC in winter), and
// the next start is named in that zone.
func TestRecurringInTimeZone(t *testing.T) {
	s := mustParse(t, "CRON_TZ=Europe/Berlin 0 2 * * SAT for 4h")
	fri := at(t, "Europe/Berlin", "2026-12-04 23:00") // a Friday
	if open, _ := s.Open(fri); open {
		t.Fatal("open on Friday night")
	}
	next := s.Next(fri)
	if want := at(t, "Europe/Berlin", "2026-12-05 02:00"); !next.Equal(want) {
		t.Fatalf("next %s, want %s", next, want)
	}
	if next.UTC().Hour() != 1 {
		t.Fatalf("02:00 Berlin is %s UTC", next.UTC())
	}
	for _, c := range []struct {
		local string
		open  bool
	}{{"2026-12-05 01:59", false}, {"2026-12-05 02:00", true}, {"2026-12-05 05:59", true}, {"2026-12-05 06:00", false}} {
		open, closes := s.Open(at(t, "Europe/Berlin", c.local))
		if open != c.open {
			t.Errorf("%s Berlin: open %v, want %v", c.local, open, c.open)
		}
		if open && !closes.Equal(at(t, "Europe/Berlin", "2026-12-05 06:00")) {
			t.Errorf("%s: closes %s", c.local, closes)
		}
	}
	// The same schedule in New York is six hours later in absolute time.
	ny := mustParse(t, "TZ=America/New_York 0 2 * * SAT for 4h")
	if d := ny.Next(fri).Sub(next); d != 6*time.Hour {
		t.Fatalf("New York's window starts %s after Berlin's, want 6h", d)
	}
}

// TestDST: across the nights clocks change, the window's duration is elapsed
// time; a start time that does not exist that night has no window that night
// (robfig/cron skips it: the next one is the following night); one that
// exists twice opens twice, at each.
func TestDST(t *testing.T) {
	const zone = "Europe/Berlin"
	// 2026-03-29: 02:00 CET becomes 03:00 CEST.
	s := mustParse(t, "CRON_TZ=Europe/Berlin 30 2 * * * for 1h")
	next := s.Next(at(t, zone, "2026-03-29 00:00"))
	if want := at(t, zone, "2026-03-30 02:30"); !next.Equal(want) {
		t.Fatalf("spring forward: starts %s, want %s (that night skipped)", next, want)
	}
	if open, closes := s.Open(next.Add(30 * time.Minute)); !open || !closes.Equal(next.Add(time.Hour)) {
		t.Fatalf("spring forward: open %v, closes %s", open, closes)
	}
	// 01:30 for 2h on that night: 2h elapsed, 04:30 on the wall.
	long := mustParse(t, "CRON_TZ=Europe/Berlin 30 1 * * * for 2h")
	start := long.Next(at(t, zone, "2026-03-29 00:00"))
	_, closes := long.Open(start)
	if got := closes.In(start.Location()).Format("15:04"); got != "04:30" || closes.Sub(start) != 2*time.Hour {
		t.Fatalf("spring forward: 01:30 for 2h closes at %s local, after %s", got, closes.Sub(start))
	}
	// 2026-10-25: 03:00 CEST becomes 02:00 CET; 02:30 happens twice.
	first := s.Next(at(t, zone, "2026-10-25 00:00"))
	if first.UTC().Format("15:04") != "00:30" { // 02:30 CEST
		t.Fatalf("fall back: starts %s (%s UTC), want the first 02:30", first, first.UTC())
	}
	second := s.Next(first)
	if second.Sub(first) != time.Hour {
		t.Fatalf("fall back: the window starts again %s after the first 02:30, want at the second (1h)", second.Sub(first))
	}
	if open, closes := s.Open(first.Add(time.Hour + 30*time.Minute)); !open || !closes.Equal(second.Add(time.Hour)) {
		t.Fatalf("fall back: at the second 02:30 + 30m: open %v, closes %s", open, closes)
	}
	// A daily 03:00 window in New York is 24h apart on ordinary days and
	// 23h across the spring change.
	ny := mustParse(t, "CRON_TZ=America/New_York 0 3 * * * for 1h")
	a := ny.Next(at(t, "America/New_York", "2026-03-06 12:00"))
	b := ny.Next(a)
	if b.Sub(a) != 23*time.Hour {
		t.Fatalf("New York 03:00 daily across 2026-03-08: %s apart, want 23h", b.Sub(a))
	}
}

func TestExplicitAndUnion(t *testing.T) {
	s := mustParse(t, "2026-12-27T22:00:00Z/2026-12-28T02:00:00+00:00; 0 12 * * * for 30m")
	noon := time.Date(2026, 12, 27, 12, 10, 0, 0, time.UTC)
	if open, closes := s.Open(noon); !open || !closes.Equal(noon.Add(20*time.Minute)) {
		t.Fatalf("noon: open %v closes %s", open, closes)
	}
	if next := s.Next(noon); !next.Equal(time.Date(2026, 12, 27, 22, 0, 0, 0, time.UTC)) {
		t.Fatalf("next %s", next)
	}
	if open, closes := s.Open(time.Date(2026, 12, 28, 1, 0, 0, 0, time.UTC)); !open || closes.Hour() != 2 {
		t.Fatalf("inside the explicit window: %v %s", open, closes)
	}
	past := mustParse(t, "2020-01-01T00:00:00Z/2020-01-02T00:00:00Z")
	if n := past.Next(noon); !n.IsZero() {
		t.Fatalf("a past window starts again at %s", n)
	}
	// Overlapping activations extend the window.
	hourly := mustParse(t, "0 * * * * for 90m")
	if _, closes := hourly.Open(noon); !closes.After(noon.Add(time.Hour)) {
		t.Fatalf("hourly for 90m closes at %s", closes)
	}
}

func TestParseRefusals(t *testing.T) {
	for _, text := range []string{
		"0 2 * * SAT",                    // no duration
		"0 2 * * SAT for 0s",             // empty
		"0 2 * * SAT for 8d",             // not a Go duration
		"0 2 * * SAT for 200h",           // longer than a week
		"CRON_TZ=Mars/Olympus 0 2 * * *", // unknown zone, no duration either
		"CRON_TZ=Mars/Olympus 0 2 * * * for 1h",
		"@every 1h for 10m",
		"0 0 30 2 * for 1h", // February 30th
		"2026-12-28T02:00:00Z/2026-12-27T22:00:00Z",
		"tomorrow",
		";",
	} {
		if _, err := Parse(text); err == nil {
			t.Errorf("%q parsed", text)
		} else if !strings.HasPrefix(err.Error(), "window: ") {
			t.Errorf("%q: error %q lacks the package prefix", text, err)
		}
	}
	for _, text := range []string{"", "always", " Always "} {
		if s, err := Parse(text); err != nil || len(s) != 0 {
			t.Errorf("%q: %v %v", text, s, err)
		}
	}
	if got := mustParse(t, "@daily for 1h").String(); got != "@daily for 1h0m0s" {
		t.Errorf("String %q", got)
	}
}
