package interruption

import (
	"slices"
	"strings"
	"testing"
)

// FuzzParseMessage feeds Parse arbitrary queue message bodies, starting
// from the real message shapes: it never panics, and what it accepts is a
// known kind about instance IDs it found in the body, parsed the same way
// every time.
func FuzzParseMessage(f *testing.F) {
	for _, tc := range parseCases {
		f.Add(tc.body)
	}
	f.Add(`{"detail-type":"AWS Health Event","source":"aws.health","detail":{"service":"EC2","eventTypeCategory":"scheduledChange","affectedEntities":[{"entityValue":"arn:aws:ec2"},{}]}}`)
	f.Add(`{"detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","time":"not a time","detail":{}}`)
	f.Add(`{"detail":null}`)
	f.Add(`{"detail":[1,2]}`)
	f.Add(`null`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, body string) {
		m, err := Parse(body)
		if err != nil {
			if m.Kind != "" || m.InstanceIDs != nil {
				t.Errorf("Parse(%q) failed (%v) yet returned %+v", body, err, m)
			}
			return
		}
		known := []Kind{SpotInterrupted, Rebalance, ScheduledChange, InstanceStopped, InstanceTerminated, NoOp}
		if !slices.Contains(known, m.Kind) {
			t.Errorf("Parse(%q): unknown kind %q", body, m.Kind)
		}
		for _, id := range m.InstanceIDs {
			if id == "" {
				t.Errorf("Parse(%q): an empty instance ID in %q", body, m.InstanceIDs)
			}
			if m.Kind == ScheduledChange && !strings.HasPrefix(id, "i-") {
				t.Errorf("Parse(%q): scheduled change for %q, not an instance", body, id)
			}
		}
		again, err := Parse(body)
		if err != nil || again.Kind != m.Kind || !slices.Equal(again.InstanceIDs, m.InstanceIDs) || !again.Time.Equal(m.Time) {
			t.Errorf("Parse(%q) is not deterministic: %+v then %+v, %v", body, m, again, err)
		}
	})
}
