package interruption

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Kind is what a message says happens to an instance; its value labels
// metrics and disruption reasons, as Karpenter's.
type Kind string

// The kinds of messages.
const (
	SpotInterrupted    Kind = "spot_interrupted"
	Rebalance          Kind = "rebalance_recommendation"
	ScheduledChange    Kind = "scheduled_change"
	InstanceStopped    Kind = "instance_stopped"
	InstanceTerminated Kind = "instance_terminated"
	NoOp               Kind = "no_op"
)

// Message is one parsed queue message.
type Message struct {
	Kind Kind
	// InstanceIDs are the instances it is about.
	InstanceIDs []string
	// Time is when the event happened.
	Time time.Time
}

// envelope is an EventBridge event.
type envelope struct {
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Time       time.Time       `json:"time"`
	Detail     json.RawMessage `json:"detail"`
}

// Parse reads an EventBridge event. Events Nodewright does not act on
// parse as NoOp; a body that is not an event is an error.
func Parse(body string) (Message, error) {
	var e envelope
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		return Message{}, fmt.Errorf("interruption message is not an EventBridge event: %w", err)
	}
	m := Message{Kind: NoOp, Time: e.Time}
	var detail struct {
		InstanceID        string `json:"instance-id"`
		State             string `json:"state"`
		Service           string `json:"service"`
		EventTypeCategory string `json:"eventTypeCategory"`
		AffectedEntities  []struct {
			EntityValue string `json:"entityValue"`
		} `json:"affectedEntities"`
	}
	if len(e.Detail) > 0 {
		if err := json.Unmarshal(e.Detail, &detail); err != nil {
			return Message{}, fmt.Errorf("interruption message %q: detail: %w", e.DetailType, err)
		}
	}
	switch {
	case e.Source == "aws.ec2" && e.DetailType == "EC2 Spot Instance Interruption Warning":
		m.Kind = SpotInterrupted
	case e.Source == "aws.ec2" && e.DetailType == "EC2 Instance Rebalance Recommendation":
		m.Kind = Rebalance
	case e.Source == "aws.ec2" && e.DetailType == "EC2 Instance State-change Notification":
		switch strings.ToLower(detail.State) {
		case "stopping", "stopped":
			m.Kind = InstanceStopped
		case "shutting-down", "terminated":
			m.Kind = InstanceTerminated
		}
	case e.Source == "aws.health" && e.DetailType == "AWS Health Event" && detail.Service == "EC2" && detail.EventTypeCategory == "scheduledChange":
		m.Kind = ScheduledChange
		for _, a := range detail.AffectedEntities {
			if strings.HasPrefix(a.EntityValue, "i-") {
				m.InstanceIDs = append(m.InstanceIDs, a.EntityValue)
			}
		}
		return m, nil
	}
	if detail.InstanceID != "" {
		m.InstanceIDs = []string{detail.InstanceID}
	}
	return m, nil
}

// Grace is how long after the event the NodeClaim may wait for its
// replacement capacity before it is deleted: spot instances go 2 minutes
// after the warning (half a minute is kept for the drain), scheduled
// changes are days away (5 minutes is plenty), a stopping or terminating
// instance is already going. Rebalance recommendations and unknown events
// are not acted on.
func (k Kind) Grace() (time.Duration, bool) {
	switch k {
	case SpotInterrupted:
		return 90 * time.Second, true
	case ScheduledChange:
		return 5 * time.Minute, true
	case InstanceStopped, InstanceTerminated:
		return 0, true
	}
	return 0, false
}

// Event is the Kubernetes event reason a kind is reported with.
func (k Kind) Event() string {
	switch k {
	case SpotInterrupted:
		return "SpotInterrupted"
	case Rebalance:
		return "SpotRebalanceRecommendation"
	case ScheduledChange:
		return "InstanceUnhealthy"
	case InstanceStopped:
		return "InstanceStopping"
	case InstanceTerminated:
		return "InstanceTerminating"
	}
	return ""
}
