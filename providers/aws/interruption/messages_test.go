package interruption

import (
	"slices"
	"testing"
	"time"
)

// parseCases are real message shapes (EventBridge events as they reach
// SQS) and what they parse to; they also seed FuzzParseMessage.
var parseCases = []struct {
	name      string
	body      string
	kind      Kind
	instances []string
	acts      bool
}{
	{"spot interruption", `{"version":"0","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","time":"2026-11-30T10:00:00Z",
		"detail":{"instance-id":"i-1","instance-action":"terminate"}}`, SpotInterrupted, []string{"i-1"}, true},
	{"rebalance", `{"detail-type":"EC2 Instance Rebalance Recommendation","source":"aws.ec2","time":"2026-11-30T10:00:00Z","detail":{"instance-id":"i-2"}}`,
		Rebalance, []string{"i-2"}, false},
	{"stopping", `{"detail-type":"EC2 Instance State-change Notification","source":"aws.ec2","time":"2026-11-30T10:00:00Z","detail":{"instance-id":"i-3","state":"stopping"}}`,
		InstanceStopped, []string{"i-3"}, true},
	{"terminated", `{"detail-type":"EC2 Instance State-change Notification","source":"aws.ec2","time":"2026-11-30T10:00:00Z","detail":{"instance-id":"i-4","state":"terminated"}}`,
		InstanceTerminated, []string{"i-4"}, true},
	{"running is nothing", `{"detail-type":"EC2 Instance State-change Notification","source":"aws.ec2","time":"2026-11-30T10:00:00Z","detail":{"instance-id":"i-5","state":"running"}}`,
		NoOp, []string{"i-5"}, false},
	{"scheduled change", `{"detail-type":"AWS Health Event","source":"aws.health","time":"2026-11-30T10:00:00Z",
		"detail":{"service":"EC2","eventTypeCategory":"scheduledChange","affectedEntities":[{"entityValue":"i-6"},{"entityValue":"i-7"}]}}`,
		ScheduledChange, []string{"i-6", "i-7"}, true},
	{"another health event", `{"detail-type":"AWS Health Event","source":"aws.health","time":"2026-11-30T10:00:00Z",
		"detail":{"service":"EC2","eventTypeCategory":"issue","affectedEntities":[{"entityValue":"i-8"}]}}`, NoOp, nil, false},
	{"unknown event", `{"detail-type":"Something Else","source":"aws.s3","time":"2026-11-30T10:00:00Z","detail":{}}`, NoOp, nil, false},
}

func TestParse(t *testing.T) {
	for _, tc := range parseCases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Parse(tc.body)
			if err != nil {
				t.Fatal(err)
			}
			if m.Kind != tc.kind || !slices.Equal(m.InstanceIDs, tc.instances) {
				t.Errorf("Parse = %s %v, want %s %v", m.Kind, m.InstanceIDs, tc.kind, tc.instances)
			}
			if !m.Time.Equal(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)) {
				t.Errorf("time %v", m.Time)
			}
			if _, acts := m.Kind.Grace(); acts != tc.acts {
				t.Errorf("%s acts = %v, want %v", m.Kind, acts, tc.acts)
			}
		})
	}
	if _, err := Parse("not json"); err == nil {
		t.Error("a body that is not JSON parsed")
	}
}
