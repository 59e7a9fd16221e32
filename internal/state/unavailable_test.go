package state

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestUnavailableOfferingsExpire(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	u := NewUnavailableOfferings(clk, DefaultUnavailableTTL)
	u.MarkUnavailable("m5.large", "us-east-1a", "spot")
	if !u.IsUnavailable("m5.large", "us-east-1a", "spot") || u.IsUnavailable("m5.large", "us-east-1b", "spot") {
		t.Error("a refused offering is not avoided, or another one is")
	}
	clk.Step(3*time.Minute - time.Second)
	if !u.IsUnavailable("m5.large", "us-east-1a", "spot") {
		t.Error("avoided for less than three minutes")
	}
	clk.Step(time.Second)
	if u.IsUnavailable("m5.large", "us-east-1a", "spot") {
		t.Error("still avoided after three minutes")
	}
}
