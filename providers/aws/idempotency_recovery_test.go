package aws_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/pkg/cloudprovider"
	awsprovider "github.com/nodewright/nodewright/providers/aws"
	"github.com/nodewright/nodewright/providers/aws/fake"
)

// A fleet that launched nothing (here: its launch template was deleted
// behind the provider's back) whose answer was lost, or that was
// followed by a restart, leaves the NodeClaim on a token EC2 answers with
// IdempotentParameterMismatch once the request changes. The NodeClaim
// launches anyway, once the describe-consistency window after the first
// mismatch has passed without an instance being described for it; and
// not before (the first attempt might have launched an instance not yet
// described).
func TestCreateAfterAMismatchLaunchesOnceTheWindowPassed(t *testing.T) {
	for _, tc := range []struct {
		name    string
		restart bool
	}{
		{"restart after the fleet launched nothing", true},
		{"the answer that nothing was launched is lost", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t, defaultClass("default"))
			e.resolve(t, "default")
			const window = 2 * time.Minute
			refused := map[string]bool{}
			newProvider := func() *awsprovider.Provider {
				p, err := awsprovider.New(e.kube, ec2.NewFromConfig(e.cfg), awsprovider.Options{ClusterName: "demo", Clock: e.clock,
					DescribeConsistencyWindow: window,
					Unavailable:               func(it, zone, ct string) bool { return refused[it+"/"+zone+"/"+ct] }})
				if err != nil {
					t.Fatal(err)
				}
				return p
			}
			p := newProvider()
			if _, err := p.Create(ctx, e.nodeClaim("web-0")); err != nil {
				t.Fatal(err)
			}
			first := e.live()[0]
			for _, lt := range e.fake.LaunchTemplates() {
				if _, err := ec2.NewFromConfig(e.cfg).DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: aws.String(lt.Name)}); err != nil {
					t.Fatal(err)
				}
			}
			if !tc.restart {
				e.fake.Fail("CreateFleet", fake.LostResponse, 1)
			}
			if _, err := p.Create(ctx, e.nodeClaim("web-1")); err == nil {
				t.Fatal("want the launch from a deleted template to launch nothing")
			}
			refused[first.InstanceType+"/"+first.Zone+"/"+first.CapacityType] = true // the request changes
			if tc.restart {
				p = newProvider()
			}
			start := e.clock.Now()
			var err error
			for e.clock.Since(start) <= 10*time.Minute {
				if _, err = p.Create(ctx, e.nodeClaim("web-1")); err == nil {
					break
				}
				// One retry past the window may still fail: the next
				// token finds the deleted template, which the retry after
				// makes again.
				if waited := e.clock.Since(start); waited > window+30*time.Second {
					t.Fatalf("still no launch %s after the first mismatch (window %s): %v", waited, window, err)
				}
				if !strings.Contains(err.Error(), "web-1") {
					t.Errorf("error %q does not name the nodeclaim", err)
				}
				e.clock.Step(30 * time.Second)
			}
			if err != nil {
				t.Fatalf("web-1 never launches: %v", err)
			}
			if waited := e.clock.Since(start); waited < window {
				t.Errorf("launched with a new token %s after the first mismatch, before the %s window passed", waited, window)
			}
			if n := len(e.live()); n != 2 {
				t.Errorf("%d live instances, want 2 (web-0's, web-1's)", n)
			}
		})
	}
}

// A mismatch while the first launch's instance is not described yet
// does not launch another once the window passes: the instance is
// described by then and adopted.
func TestCreateAfterAMismatchAdoptsTheFirstLaunchWithinTheWindow(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, defaultClass("default"))
	e.resolve(t, "default")
	const lag = 90 * time.Second
	refused := map[string]bool{}
	p, err := awsprovider.New(e.kube, ec2.NewFromConfig(e.cfg), awsprovider.Options{ClusterName: "demo", Clock: e.clock,
		DescribeConsistencyWindow: lag,
		Unavailable:               func(it, zone, ct string) bool { return refused[it+"/"+zone+"/"+ct] }})
	if err != nil {
		t.Fatal(err)
	}
	e.fake.SetDescribeLag(lag)
	e.fake.Fail("CreateFleet", fake.LostResponse, 1)
	if _, err := p.Create(ctx, e.nodeClaim("web-1")); err == nil {
		t.Fatal("Create succeeded although the launch's answer was lost")
	}
	first := e.live()[0]
	refused[first.InstanceType+"/"+first.Zone+"/"+first.CapacityType] = true
	for i := 0; i < 6; i++ {
		got, err := p.Create(ctx, e.nodeClaim("web-1"))
		if err == nil && !strings.HasSuffix(got.Status.ProviderID, "/"+first.ID) {
			t.Fatalf("after %s: launched %s, want the first launch's %s", time.Duration(i)*30*time.Second, got.Status.ProviderID, first.ID)
		}
		e.clock.Step(30 * time.Second)
	}
	if n := len(e.live()); n != 1 {
		t.Errorf("%d live instances for one NodeClaim, want 1", n)
	}
}

// A retry after a lost answer whose instance was terminated meanwhile
// (a spot reclaim) does not hand back the dead instance: the NodeClaim
// gets a live one.
func TestCreateAfterALostAnswerDoesNotReturnATerminatedInstance(t *testing.T) {
	for _, state := range []string{"terminated", "shutting-down"} {
		t.Run(state, func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t, defaultClass("default"))
			e.resolve(t, "default")
			e.fake.Fail("CreateFleet", fake.LostResponse, 1)
			if _, err := e.provider.Create(ctx, e.nodeClaim("web-1")); err == nil {
				t.Fatal("want an error")
			}
			dead := e.live()[0].ID
			if err := e.fake.SetInstanceState(dead, state); err != nil {
				t.Fatal(err)
			}
			got, err := e.provider.Create(ctx, e.nodeClaim("web-1"))
			if err == nil && strings.HasSuffix(got.Status.ProviderID, "/"+dead) {
				t.Fatalf("the retry returned the %s instance %s", state, dead)
			}
			if err != nil {
				got, err = e.provider.Create(ctx, e.nodeClaim("web-1"))
			}
			if err != nil {
				t.Fatalf("no launch after the instance died: %v", err)
			}
			alive := false
			for _, in := range e.live() {
				alive = alive || in.ID != dead && in.State != "shutting-down" && strings.HasSuffix(got.Status.ProviderID, "/"+in.ID)
			}
			if !alive {
				t.Errorf("the NodeClaim got %s, not a live instance", got.Status.ProviderID)
			}
		})
	}
}

// An instance that EC2 does not describe yet is not dead: a replayed
// answer naming it is the NodeClaim's launch.
func TestCreateAfterALostAnswerTrustsAnInstanceNotDescribedYet(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, defaultClass("default"))
	e.resolve(t, "default")
	e.fake.SetDescribeLag(time.Minute)
	e.fake.Fail("CreateFleet", fake.LostResponse, 1)
	if _, err := e.provider.Create(ctx, e.nodeClaim("web-1")); err == nil {
		t.Fatal("want an error")
	}
	got, err := e.provider.Create(ctx, e.nodeClaim("web-1"))
	if err != nil || !strings.HasSuffix(got.Status.ProviderID, "/"+e.live()[0].ID) || len(e.live()) != 1 {
		t.Errorf("retry: %v, %v; want the one instance %s", got, err, e.live()[0].ID)
	}
}

// A NodeClaim named like an earlier one (another UID) whose instance was
// never recorded gets an instance of its own that meets its own
// requirements, not the earlier NodeClaim's.
func TestCreateDoesNotAdoptTheInstanceOfAnEarlierSameNamedNodeClaim(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, defaultClass("default"))
	e.resolve(t, "default")
	earlier, err := e.provider.Create(ctx, e.nodeClaim("web-1", req(corev1.LabelTopologyZone, "us-east-1a")))
	if err != nil {
		t.Fatal(err)
	}
	nc := e.nodeClaim("web-1", req(corev1.LabelTopologyZone, "us-east-1b"))
	nc.UID = types.UID("uid-web-1-second")
	got, err := e.provider.Create(ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	if z := got.Labels[corev1.LabelTopologyZone]; z != "us-east-1b" || got.Status.ProviderID == earlier.Status.ProviderID {
		t.Errorf("NodeClaim requiring us-east-1b got %s in zone %q; the earlier same-named NodeClaim's is %s", got.Status.ProviderID, z, earlier.Status.ProviderID)
	}
	var tagged []string
	for _, in := range e.live() {
		if in.Tags["karpenter.sh/nodeclaim"] == "web-1" {
			tagged = append(tagged, in.Tags[awsprovider.TagNodeClaimUID])
		}
	}
	if len(tagged) != 2 || tagged[0] == tagged[1] {
		t.Errorf("UID tags of the two instances named web-1: %q, want uid-web-1 and uid-web-1-second", tagged)
	}
	// Again (a restart): the second NodeClaim keeps its own instance.
	again, err := e.provider.Create(ctx, nc)
	if err != nil || again.Status.ProviderID != got.Status.ProviderID {
		t.Errorf("Create again: %v, %v; want %s", again, err, got.Status.ProviderID)
	}
}

// A NodeClaim refused for capacity is launched again at once if it is
// still there (its deletion failed): the refusal is final for its token,
// so the retry, which leaves the refused offerings out, takes the next
// token instead of being refused for other parameters.
func TestCreateAgainAfterInsufficientCapacityLaunchesAtOnce(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, defaultClass("default"))
	e.resolve(t, "default")
	refused := map[string]bool{}
	p, err := awsprovider.New(e.kube, ec2.NewFromConfig(e.cfg), awsprovider.Options{ClusterName: "demo", Clock: e.clock,
		Unavailable: func(it, zone, ct string) bool { return refused[it+"/"+zone+"/"+ct] }})
	if err != nil {
		t.Fatal(err)
	}
	nc := e.nodeClaim("web-1", req(corev1.LabelInstanceTypeStable, "m5.large"), req(karpv1.LabelCapacityType, "on-demand"),
		req(corev1.LabelTopologyZone, "us-east-1a", "us-east-1b"))
	for _, zone := range []string{"us-east-1a", "us-east-1b"} {
		e.fake.InsufficientCapacity("m5.large", zone, "on-demand", true)
	}
	_, err = p.Create(ctx, nc)
	if !cloudprovider.IsInsufficientCapacityError(err) {
		t.Fatalf("want insufficient capacity, got %v", err)
	}
	refused["m5.large/us-east-1a/on-demand"] = true
	e.fake.InsufficientCapacity("m5.large", "us-east-1b", "on-demand", false)
	got, err := p.Create(ctx, nc)
	if err != nil || got.Labels[corev1.LabelTopologyZone] != "us-east-1b" {
		t.Errorf("Create again after insufficient capacity: %v, %v; want a launch in us-east-1b", got, err)
	}
}

// An instance launched before instances carried the NodeClaim's UID (an
// upgrade) is the NodeClaim's if it was launched after the NodeClaim was
// created, and an earlier same-named NodeClaim's if before.
func TestCreateAdoptsAnInstanceWithoutAUIDTagOnlyIfLaunchedAfterTheNodeClaim(t *testing.T) {
	for _, tc := range []struct {
		name      string
		createdAt time.Duration // NodeClaim creation, relative to the launch
		adopted   bool
	}{
		{"launched after the nodeclaim was created", -time.Minute, true},
		{"launched before the nodeclaim was created", time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t, defaultClass("default"))
			e.resolve(t, "default")
			id := e.fake.AddInstance(fake.Instance{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "on-demand", Tags: map[string]string{
				"karpenter.sh/nodeclaim": "web-1", "karpenter.sh/nodepool": "default", "kubernetes.io/cluster/demo": "owned"}})
			nc := e.nodeClaim("web-1")
			nc.CreationTimestamp = metav1.NewTime(e.clock.Now().Add(tc.createdAt))
			got, err := e.provider.Create(ctx, nc)
			if err != nil {
				t.Fatal(err)
			}
			if adopted := strings.HasSuffix(got.Status.ProviderID, "/"+id); adopted != tc.adopted {
				t.Errorf("got %s; adopted the instance without a UID tag: %t, want %t", got.Status.ProviderID, adopted, tc.adopted)
			}
		})
	}
}
