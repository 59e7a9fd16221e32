package v1

import (
	"encoding/json"
	"fmt"
	"time"
)

// Never is the literal that disables a NillableDuration (for example
// `expireAfter: Never` or `consolidateAfter: Never`).
const Never = "Never"

// NillableDuration is a duration that may also be the string "Never", which
// decodes to a nil Duration. It remembers the exact text it was decoded from and
// writes that text back, so that objects round-trip byte for byte (GitOps tools
// see no diff between "30s" and "0h0m30s").
type NillableDuration struct {
	*time.Duration

	// Raw is the JSON text this value was decoded from; empty when built in code.
	Raw []byte `json:"-" hash:"ignore"`
}

// MustParseNillableDuration parses "Never" or a Go duration and panics on error.
// It is meant for constants in code and tests.
func MustParseNillableDuration(s string) NillableDuration {
	var d NillableDuration
	if err := d.UnmarshalJSON([]byte(fmt.Sprintf("%q", s))); err != nil {
		panic(err)
	}
	return d
}

// UnmarshalJSON accepts "Never" or a string time.ParseDuration understands.
func (d *NillableDuration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string: %w", err)
	}
	d.Raw = append([]byte(nil), b...)
	if s == Never {
		d.Duration = nil
		return nil
	}
	parsed, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("parsing duration %q: %w", s, err)
	}
	d.Duration = &parsed
	return nil
}

// MarshalJSON writes the original text when there is one, "Never" for a nil
// duration, and the Go form of the duration otherwise.
func (d NillableDuration) MarshalJSON() ([]byte, error) {
	if d.Raw != nil {
		return d.Raw, nil
	}
	if d.Duration == nil {
		return json.Marshal(Never)
	}
	return json.Marshal(d.Duration.String())
}

// IsZero reports whether the value is unset (neither a duration nor "Never"),
// so that encoding omits it and the API server applies the field's default.
func (d NillableDuration) IsZero() bool { return d.Duration == nil && d.Raw == nil }

// IsNever reports whether the duration is disabled ("Never").
func (d NillableDuration) IsNever() bool { return d.Duration == nil && d.Raw != nil }

// String returns the duration in Go form, "Never", or "" when unset.
func (d NillableDuration) String() string {
	if d.IsZero() {
		return ""
	}
	if d.Duration == nil {
		return Never
	}
	return d.Duration.String()
}
