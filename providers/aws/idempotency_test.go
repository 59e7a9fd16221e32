package aws_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/controller/nodeclaim"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/state"
	"github.com/nodewright/nodewright/pkg/cloudprovider"
	awsprovider "github.com/nodewright/nodewright/providers/aws"
	"github.com/nodewright/nodewright/providers/aws/fake"
)

// live are the fake's instances that are not terminated.
func (e *env) live() []fake.Instance {
	var out []fake.Instance
	for _, in := range e.fake.Instances() {
		if in.State != "terminated" {
			out = append(out, in)
		}
	}
	return out
}

// A second Create for a NodeClaim that has an instance (a restart, or a
// status write that failed after the launch) returns that instance.
func TestCreateAgainAdoptsTheNodeClaimsInstance(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, defaultClass("default"))
	e.resolve(t, "default")
	first, err := e.provider.Create(ctx, e.nodeClaim("web-1"))
	if err != nil {
		t.Fatal(err)
	}
	// A fresh provider: nothing in memory, as after a restart.
	restarted, err := awsprovider.New(e.kube, ec2.NewFromConfig(e.cfg), awsprovider.Options{ClusterName: "demo", Clock: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	again, err := restarted.Create(ctx, e.nodeClaim("web-1"))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(e.live()); n != 1 {
		t.Errorf("%d instances after two Creates for one NodeClaim, want 1", n)
	}
	if again.Status.ProviderID != first.Status.ProviderID || again.Labels[corev1.LabelInstanceTypeStable] != first.Labels[corev1.LabelInstanceTypeStable] ||
		again.Status.Capacity.Cpu().Cmp(*first.Status.Capacity.Cpu()) != 0 || again.Status.ImageID != first.Status.ImageID {
		t.Errorf("adopted %s %v (image %s), launched %s %v (image %s)", again.Status.ProviderID, again.Labels, again.Status.ImageID,
			first.Status.ProviderID, first.Labels, first.Status.ImageID)
	}
	// Another cluster's instance tagged with the same NodeClaim name is
	// not this cluster's.
	e.fake.AddInstance(fake.Instance{InstanceType: "m5.large", Zone: "us-east-1a", Tags: map[string]string{
		"karpenter.sh/nodeclaim": "web-2", "karpenter.sh/nodepool": "default", "kubernetes.io/cluster/other": "owned"}})
	got, err := e.provider.Create(ctx, e.nodeClaim("web-2"))
	if err != nil || strings.Contains(got.Status.ProviderID, "us-east-1a/") && got.Labels[corev1.LabelInstanceTypeStable] == "m5.large" {
		t.Errorf("Create next to another cluster's instance of the same name: %v, %v; want a launch of its own", got, err)
	}
}

// A launch whose answer is lost, retried while EC2 does not describe the
// instance yet, gets the same instance through the client token.
func TestCreateAfterALostLaunchAnswerLaunchesOnce(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, defaultClass("default"))
	e.resolve(t, "default")
	e.fake.SetDescribeLag(time.Minute)
	e.fake.Fail("CreateFleet", fake.LostResponse, 1)
	if _, err := e.provider.Create(ctx, e.nodeClaim("web-1")); err == nil {
		t.Fatal("Create succeeded although the launch's answer was lost")
	}
	if n := len(e.live()); n != 1 {
		t.Fatalf("%d instances after the lost answer, want 1", n)
	}
	got, err := e.provider.Create(ctx, e.nodeClaim("web-1"))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(e.live()); n != 1 {
		t.Errorf("%d instances after the retry, want 1", n)
	}
	if want := "/" + e.live()[0].ID; !strings.HasSuffix(got.Status.ProviderID, want) {
		t.Errorf("the retry returned %s, want the instance launched first (%s)", got.Status.ProviderID, e.live()[0].ID)
	}
}

// A retry that would ask EC2 for something else (an offering marked
// unavailable meanwhile) while the first launch is not described yet
// fails without launching; once EC2 describes the instance, it is
// adopted.
func TestCreateRetriedWithOtherParametersWaitsForTheFirstLaunch(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, defaultClass("default"))
	e.resolve(t, "default")
	refused := map[string]bool{}
	provider, err := awsprovider.New(e.kube, ec2.NewFromConfig(e.cfg), awsprovider.Options{ClusterName: "demo", Clock: e.clock,
		Unavailable: func(it, zone, ct string) bool { return refused[it+"/"+zone+"/"+ct] }})
	if err != nil {
		t.Fatal(err)
	}
	e.fake.SetDescribeLag(time.Minute)
	e.fake.Fail("CreateFleet", fake.LostResponse, 1)
	if _, err := provider.Create(ctx, e.nodeClaim("web-1")); err == nil {
		t.Fatal("Create succeeded although the launch's answer was lost")
	}
	first := e.live()[0]
	refused[first.InstanceType+"/"+first.Zone+"/"+first.CapacityType] = true
	_, err = provider.Create(ctx, e.nodeClaim("web-1"))
	if err == nil || cloudprovider.IsInsufficientCapacityError(err) || !strings.Contains(err.Error(), "web-1") {
		t.Errorf("a retry with other parameters within the lag: %v; want an error naming the nodeclaim, not insufficient capacity", err)
	}
	if n := len(e.live()); n != 1 {
		t.Fatalf("%d instances after the retry with other parameters, want 1", n)
	}
	e.clock.Step(time.Minute)
	got, err := provider.Create(ctx, e.nodeClaim("web-1"))
	if err != nil || !strings.HasSuffix(got.Status.ProviderID, "/"+first.ID) {
		t.Errorf("once described: %v, %v; want instance %s adopted", got, err, first.ID)
	}
	if n := len(e.live()); n != 1 {
		t.Errorf("%d instances in the end, want 1", n)
	}
}

// A fleet that answered that it launched nothing (not for capacity) is
// not replayed to the NodeClaim's next attempt: a launch template deleted
// behind the provider's back is made again and the retry launches.
func TestCreateRetriesAFleetThatLaunchedNothing(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, defaultClass("default"))
	e.resolve(t, "default")
	if _, err := e.provider.Create(ctx, e.nodeClaim("web-0")); err != nil {
		t.Fatal(err)
	}
	for _, lt := range e.fake.LaunchTemplates() {
		if _, err := ec2.NewFromConfig(e.cfg).DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: aws.String(lt.Name)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.provider.Create(ctx, e.nodeClaim("web-1")); err == nil || !strings.Contains(err.Error(), "NotFound") {
		t.Fatalf("a launch from a deleted template: %v, want the template's NotFound", err)
	}
	got, err := e.provider.Create(ctx, e.nodeClaim("web-1"))
	if err != nil {
		t.Fatalf("the retry after the template was made again: %v", err)
	}
	if n := len(e.live()); n != 2 || !strings.HasSuffix(got.Status.ProviderID, e.live()[1].ID) {
		t.Errorf("%d instances, retry launched %s; want 2 with the retry's the second", n, got.Status.ProviderID)
	}
}

// The NodeClaim controller launches once when the status write after the
// launch fails: the next reconcile finds the instance instead of buying
// another, whether the write errs, conflicts, or the process restarts. A
// server error fails the reconcile; a conflict is written again on a fresh
// read or requeued, without an error.
func TestNodeClaimControllerLaunchesOnceWhenTheStatusWriteFails(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		lag     time.Duration
		wantErr bool
	}{
		{"server error", apierrors.NewInternalError(errors.New("etcd timed out")), 0, true},
		{"conflict", apierrors.NewConflict(karpv1.SchemeGroupVersion.WithResource("nodeclaims").GroupResource(), "web-1", errors.New("changed meanwhile")), 0, false},
		{"server error while EC2 does not describe the instance yet", apierrors.NewInternalError(errors.New("etcd timed out")), time.Minute, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			failures := 1
			// The status write that records the launch fails once, whether
			// the controller sends it as an update or a patch.
			fails := func(obj client.Object) bool {
				nc, ok := obj.(*karpv1.NodeClaim)
				if ok && failures > 0 && meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeLaunched) {
					failures--
					return true
				}
				return false
			}
			e := newEnv(t, defaultClass("default"), interceptor.Funcs{
				SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
					if fails(obj) {
						return tc.err
					}
					return c.SubResource(sub).Update(ctx, obj, opts...)
				},
				SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
					if fails(obj) {
						return tc.err
					}
					return c.SubResource(sub).Patch(ctx, obj, p, opts...)
				},
			})
			e.resolve(t, "default")
			e.fake.SetDescribeLag(tc.lag)
			nc := e.nodeClaim("web-1")
			nc.CreationTimestamp = metav1.NewTime(e.clock.Now())
			if err := e.kube.Create(ctx, nc); err != nil {
				t.Fatal(err)
			}
			newController := func() *nodeclaim.Controller {
				// Each reconcile on a fresh controller and provider: a
				// restart forgets everything held in memory.
				provider, err := awsprovider.New(e.kube, ec2.NewFromConfig(e.cfg), awsprovider.Options{ClusterName: "demo", Clock: e.clock})
				if err != nil {
					t.Fatal(err)
				}
				m, err := metrics.New(prometheus.NewRegistry(), "test", "")
				if err != nil {
					t.Fatal(err)
				}
				return nodeclaim.New(e.kube, provider, e.clock, state.NewUnavailableOfferings(e.clock, state.DefaultUnavailableTTL), record.NewFakeRecorder(100), m)
			}
			req := reconcile.Request{NamespacedName: client.ObjectKey{Name: "web-1"}}
			if _, err := newController().Reconcile(ctx, req); (err != nil) != tc.wantErr {
				t.Fatalf("the reconcile whose status write fails: error %v, want an error: %t", err, tc.wantErr)
			}
			if failures != 0 {
				t.Fatal("the launch's status write was never sent")
			}
			if _, err := newController().Reconcile(ctx, req); err != nil {
				t.Fatalf("the reconcile after: %v", err)
			}
			if n := len(e.live()); n != 1 {
				t.Errorf("%d instances for one NodeClaim, want 1", n)
			}
			got := &karpv1.NodeClaim{}
			if err := e.kube.Get(ctx, req.NamespacedName, got); err != nil {
				t.Fatal(err)
			}
			if !meta.IsStatusConditionTrue(got.Status.Conditions, karpv1.ConditionTypeLaunched) || !strings.HasSuffix(got.Status.ProviderID, "/"+e.live()[0].ID) {
				t.Errorf("nodeclaim status: provider ID %q, conditions %v; want Launched with instance %s", got.Status.ProviderID, got.Status.Conditions, e.live()[0].ID)
			}
		})
	}
}
