package cloudprovider

import (
	"errors"
	"fmt"
	"testing"
)

func TestTypedErrorsSurviveWrapping(t *testing.T) {
	base := errors.New("boom")
	ice := fmt.Errorf("launching nodeclaim x: %w", NewInsufficientCapacityError(base, Offering{"m5.large", "us-east-1a", "spot"}))
	notFound := fmt.Errorf("getting: %w", NewNodeClaimNotFoundError(base))
	notReady := fmt.Errorf("creating: %w", NewNodeClassNotReadyError(base))
	cases := []struct {
		err                  error
		ice, notFound, ready bool
		kind                 string
	}{
		{ice, true, false, false, "InsufficientCapacityError"},
		{notFound, false, true, false, "NodeClaimNotFoundError"},
		{notReady, false, false, true, "NodeClassNotReadyError"},
		{base, false, false, false, ""},
	}
	for _, c := range cases {
		if IsInsufficientCapacityError(c.err) != c.ice || IsNodeClaimNotFoundError(c.err) != c.notFound || IsNodeClassNotReadyError(c.err) != c.ready {
			t.Errorf("%v: classified wrongly", c.err)
		}
		if ErrorKind(c.err) != c.kind {
			t.Errorf("%v: kind %q, want %q", c.err, ErrorKind(c.err), c.kind)
		}
		if !errors.Is(c.err, base) {
			t.Errorf("%v does not unwrap to its cause", c.err)
		}
	}
	if got := RefusedOfferings(ice); len(got) != 1 || got[0].String() != "m5.large/us-east-1a/spot" {
		t.Errorf("refused offerings %v", got)
	}
	if IgnoreNodeClaimNotFoundError(notFound) != nil || IgnoreNodeClaimNotFoundError(base) == nil {
		t.Error("IgnoreNodeClaimNotFoundError")
	}
}
