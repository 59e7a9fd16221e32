package v1

import (
	"encoding/json"
	"testing"
	"time"
)

func TestNillableDurationRoundTrip(t *testing.T) {
	cases := []struct {
		in      string
		never   bool
		want    time.Duration
		wantOut string
	}{
		{in: `"Never"`, never: true, wantOut: `"Never"`},
		{in: `"30s"`, want: 30 * time.Second, wantOut: `"30s"`},
		// The text the user wrote is written back, not Go's "1h30m0s".
		{in: `"90m"`, want: 90 * time.Minute, wantOut: `"90m"`},
		{in: `"1h0m0s"`, want: time.Hour, wantOut: `"1h0m0s"`},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			var d NillableDuration
			if err := json.Unmarshal([]byte(c.in), &d); err != nil {
				t.Fatal(err)
			}
			if d.IsNever() != c.never {
				t.Errorf("IsNever() = %v, want %v", d.IsNever(), c.never)
			}
			if !c.never && (d.Duration == nil || *d.Duration != c.want) {
				t.Errorf("Duration = %v, want %v", d.Duration, c.want)
			}
			out, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != c.wantOut {
				t.Errorf("marshalled %s, want %s", out, c.wantOut)
			}
		})
	}
}

func TestNillableDurationRejectsGarbage(t *testing.T) {
	for _, in := range []string{`"5x"`, `"forever"`, `30`, `""`} {
		var d NillableDuration
		if err := json.Unmarshal([]byte(in), &d); err == nil {
			t.Errorf("%s decoded without error to %v", in, d)
		}
	}
}

// An unset duration is omitted, so the API server applies the field default
// instead of receiving "Never".
func TestUnsetNillableDurationIsOmitted(t *testing.T) {
	out, err := json.Marshal(Disruption{ConsolidationPolicy: ConsolidationPolicyWhenEmpty})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"consolidationPolicy":"WhenEmpty"}`; string(out) != want {
		t.Errorf("marshalled %s, want %s", out, want)
	}
	built := Disruption{ConsolidateAfter: MustParseNillableDuration("Never")}
	out, err = json.Marshal(built)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"consolidateAfter":"Never"}`; string(out) != want {
		t.Errorf("marshalled %s, want %s", out, want)
	}
}
