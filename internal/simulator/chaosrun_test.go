package simulator

import (
	"context"
	"strings"
	"testing"
	"time"
)

// One chaos seed in AWSEvery plays examples/chaos-aws on the AWS provider
// against the fake AWS: it launches (the EC2NodeClass pools work there),
// the fake loses CreateFleet answers, and its replay command names the
// example and the provider.
func TestChaosSeedsPlayAWS(t *testing.T) {
	if testing.Short() {
		t.Skip("plays a 90-minute chaos day")
	}
	res := ChaosSeeds(context.Background(), []int64{AWSEvery}, 1, defaultCatalog(t))[0]
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if res.Cloud != "aws" {
		t.Fatalf("seed %d played on %q, want aws", AWSEvery, res.Cloud)
	}
	for _, v := range res.Violations {
		if !strings.Contains(v.Replay, "-f examples/chaos-aws --cloud-provider aws --chaos 4") {
			t.Errorf("replay %q: want the aws example and provider", v.Replay)
		}
		t.Errorf("%s at %s: %s\n  %s", v.Invariant, time.Duration(v.At), v.Message, strings.Join(v.Timeline, "\n  "))
	}
	t.Logf("faults: %v", res.Faults)
	if res.Faults[FaultCloudLaunchLost] == 0 {
		t.Errorf("no CreateFleet answer lost: faults %v", res.Faults)
	}
}
