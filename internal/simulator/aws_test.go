package simulator

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/nodewright/nodewright/api/aws/v1"
	"github.com/nodewright/nodewright/examples"
)

// The seed example with the AWS provider against the in-process fake
// AWS: the EC2NodeClass resolves, every pod binds to a node the fake's
// instances registered, and the scenario's spot interruptions go through
// the interruption queue (replacements first, then the NodeClaims go).
func TestSeedExampleOnTheAWSProvider(t *testing.T) {
	in, err := LoadFS(examples.FS, "seed/scenario.yaml")
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Seed: 1, CloudProvider: "aws", InstanceTypes: defaultCatalog(t)}
	opts.Duration = timeDuration(*in.Scenario.Spec.Duration)
	opts.BootDelay = timeDuration(*in.Scenario.Spec.BootDelay)
	e, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := e.Load(ctx, in); err != nil {
		t.Fatal(err)
	}
	rep, err := e.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Summary
	if s.PodsPendingAtEnd != 0 || s.PodsBound != s.PodsCreated {
		t.Errorf("%d of %d pods bound, %d pending: want every pod bound", s.PodsBound, s.PodsCreated, s.PodsPendingAtEnd)
	}
	if s.Disruptions[ReasonInterrupted] != 2 {
		t.Errorf("disruptions %v: want the 2 spot interruptions handled", s.Disruptions)
	}
	for _, msg := range rep.Errors {
		t.Errorf("controller error: %s", msg)
	}
	class := &awsv1.EC2NodeClass{}
	if err := e.Client().Get(ctx, client.ObjectKey{Name: "default"}, class); err != nil {
		t.Fatal(err)
	}
	if !meta.IsStatusConditionTrue(class.Status.Conditions, "Ready") || len(class.Status.Subnets) != 3 {
		t.Errorf("EC2NodeClass status %+v: want Ready with the 3 subnets", class.Status)
	}
	launched := 0
	for _, in := range e.aws.Instances() {
		if in.Tags["karpenter.sh/nodepool"] != "" {
			launched++
		}
	}
	if launched != s.NodeClaimsLaunched {
		t.Errorf("%d fake instances for %d NodeClaims launched", launched, s.NodeClaimsLaunched)
	}
	// Each interrupted node's replacement was launched before it went.
	checked := 0
	for i, entry := range rep.Timeline {
		if entry.Kind != EntryTerminated || !strings.Contains(entry.Reason+entry.Message, ReasonInterrupted) {
			continue
		}
		checked++
		before := false
		for _, earlier := range rep.Timeline[:i] {
			if earlier.Kind == EntryLaunched && time.Duration(entry.At)-time.Duration(earlier.At) <= time.Minute {
				before = true
			}
		}
		if !before {
			t.Errorf("interrupted %s went with no replacement launched in the minute before", entry.NodeClaim)
		}
	}
	if checked != 2 {
		t.Errorf("%d interrupted NodeClaims in the timeline, want 2", checked)
	}
}
