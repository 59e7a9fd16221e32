package aws_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/nodewright/nodewright/api/aws/v1"
	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/controller/nodeclaim"
	"github.com/nodewright/nodewright/pkg/catalog"
	"github.com/nodewright/nodewright/pkg/cloudprovider"
	"github.com/nodewright/nodewright/pkg/cloudprovider/providertest"
	awsprovider "github.com/nodewright/nodewright/providers/aws"
	"github.com/nodewright/nodewright/providers/aws/fake"
	"github.com/nodewright/nodewright/providers/aws/nodeclass"
)

// env is the provider and the EC2NodeClass controller on a fake AWS of
// the default world for cluster "demo", selling a few types.
type env struct {
	fake     *fake.Server
	kube     client.Client
	provider *awsprovider.Provider
	classes  *nodeclass.Controller
	pool     *karpv1.NodePool
	clock    *clocktesting.FakeClock
	cfg      aws.Config
}

var fewTypes = []string{"t3.micro", "c5.large", "m5.large", "m5.xlarge", "r5.large", "c6g.large", "g5.xlarge"}

func subset(t *testing.T, names []string) []catalog.InstanceType {
	t.Helper()
	all, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	var out []catalog.InstanceType
	for _, it := range all {
		if slices.Contains(names, it.Name) {
			out = append(out, it)
		}
	}
	return out
}

func defaultClass(name string) *awsv1.EC2NodeClass {
	discovery := map[string]string{"karpenter.sh/discovery": "demo"}
	return &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: awsv1.EC2NodeClassSpec{
		Role:                       "KarpenterNodeRole-demo",
		AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
		SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: discovery}},
		SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: discovery}},
	}}
}

// newEnv builds the env; intercept, when given, wraps the API client.
func newEnv(t *testing.T, class *awsv1.EC2NodeClass, intercept ...interceptor.Funcs) *env {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, karpv1.AddToScheme, awsv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	clk := clocktesting.NewFakeClock(metav1.Now().Time)
	f, err := fake.New(fake.Options{World: fake.DefaultWorld("demo"), InstanceTypes: subset(t, fewTypes), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	cfg := fake.InProcessConfig(f)
	builder := crfake.NewClientBuilder().WithScheme(s).WithObjects(class).WithStatusSubresource(&awsv1.EC2NodeClass{}, &karpv1.NodeClaim{}).
		WithIndex(&corev1.Node{}, nodeclaim.NodeProviderIDIndex, func(o client.Object) []string { return []string{o.(*corev1.Node).Spec.ProviderID} })
	for _, f := range intercept {
		builder = builder.WithInterceptorFuncs(f)
	}
	kube := builder.Build()
	provider, err := awsprovider.New(kube, ec2.NewFromConfig(cfg), awsprovider.Options{ClusterName: "demo", ClusterEndpoint: "https://demo.example", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	classes := nodeclass.New(kube, ec2.NewFromConfig(cfg), ssm.NewFromConfig(cfg), iam.NewFromConfig(cfg), clk,
		nodeclass.Options{ClusterName: "demo", Region: "us-east-1", KubernetesVersion: "1.37"})
	pool := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	pool.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: class.Name}
	return &env{fake: f, kube: kube, provider: provider, classes: classes, pool: pool, clock: clk, cfg: cfg}
}

// resolve runs the EC2NodeClass controller once and returns the class.
func (e *env) resolve(t *testing.T, name string) *awsv1.EC2NodeClass {
	t.Helper()
	if _, err := e.classes.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: name}}); err != nil {
		t.Fatalf("reconciling ec2nodeclass %s: %v", name, err)
	}
	class := &awsv1.EC2NodeClass{}
	if err := e.kube.Get(context.Background(), client.ObjectKey{Name: name}, class); err != nil {
		t.Fatal(err)
	}
	return class
}

func (e *env) nodeClaim(name string, extra ...karpv1.NodeSelectorRequirementWithMinValues) *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{karpv1.LabelNodePool: e.pool.Name}}}
	nc.Spec.NodeClassRef = e.pool.Spec.Template.Spec.NodeClassRef
	nc.Spec.Requirements = append([]karpv1.NodeSelectorRequirementWithMinValues{
		{Key: karpv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot", "on-demand"}},
		{Key: karpv1.LabelNodePool, Operator: corev1.NodeSelectorOpIn, Values: []string{e.pool.Name}},
	}, extra...)
	nc.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	return nc
}

func req(key string, values ...string) karpv1.NodeSelectorRequirementWithMinValues {
	return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}
}

func TestContract(t *testing.T) {
	providertest.Run(t, func(t *testing.T) providertest.Harness {
		e := newEnv(t, defaultClass("default"))
		e.resolve(t, "default")
		return providertest.Harness{Provider: e.provider, NodePool: e.pool, NodeClaim: e.nodeClaim}
	})
}

func TestNodeClassStatus(t *testing.T) {
	e := newEnv(t, defaultClass("default"))
	class := e.resolve(t, "default")
	if !meta.IsStatusConditionTrue(class.Status.Conditions, "Ready") {
		t.Fatalf("Ready is not True: %+v", class.Status.Conditions)
	}
	if len(class.Status.Subnets) != 3 || len(class.Status.SecurityGroups) != 1 || len(class.Status.AMIs) != 4 {
		t.Errorf("status: %d subnets, %d security groups, %d AMIs; want 3, 1, 4", len(class.Status.Subnets), len(class.Status.SecurityGroups), len(class.Status.AMIs))
	}
	// The role gets an instance profile of its own, holding it.
	want := nodeclass.ProfileName("demo", "us-east-1", "default")
	if class.Status.InstanceProfile != want {
		t.Errorf("status.instanceProfile = %q, want %q", class.Status.InstanceProfile, want)
	}
	i := slices.IndexFunc(e.fake.InstanceProfiles(), func(p fake.InstanceProfile) bool { return p.Name == want })
	if i < 0 || e.fake.InstanceProfiles()[i].Role != "KarpenterNodeRole-demo" {
		t.Errorf("instance profiles %+v: want %s holding KarpenterNodeRole-demo", e.fake.InstanceProfiles(), want)
	}
	if class.Annotations[awsv1.AnnotationNodeClassHash] == "" || !slices.Contains(class.Finalizers, nodeclass.Finalizer) {
		t.Errorf("annotations %v, finalizers %v: want the hash and %s", class.Annotations, class.Finalizers, nodeclass.Finalizer)
	}
}

func TestNodeClassNotReadyNamesTheSelector(t *testing.T) {
	cases := []struct {
		name      string
		change    func(*awsv1.EC2NodeClass)
		condition string
		mentions  string
	}{
		{"subnets", func(c *awsv1.EC2NodeClass) {
			c.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "other"}}}
		}, "SubnetsReady", "other"},
		{"security groups", func(c *awsv1.EC2NodeClass) {
			c.Spec.SecurityGroupSelectorTerms = []awsv1.SecurityGroupSelectorTerm{{ID: "sg-missing"}}
		}, "SecurityGroupsReady", "sg-missing"},
		{"amis", func(c *awsv1.EC2NodeClass) {
			c.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Name: "no-such-image-*"}}
		}, "AMIsReady", "no-such-image"},
		{"role", func(c *awsv1.EC2NodeClass) { c.Spec.Role = "NoSuchRole" }, "InstanceProfileReady", "NoSuchRole"},
		{"instance profile", func(c *awsv1.EC2NodeClass) {
			c.Spec.Role, c.Spec.InstanceProfile = "", new("missing-profile")
		}, "InstanceProfileReady", "missing-profile"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			class := defaultClass("broken")
			tc.change(class)
			e := newEnv(t, class)
			got := e.resolve(t, "broken")
			c := meta.FindStatusCondition(got.Status.Conditions, tc.condition)
			ready := meta.FindStatusCondition(got.Status.Conditions, "Ready")
			if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, tc.mentions) {
				t.Errorf("%s = %+v, want False naming %q", tc.condition, c, tc.mentions)
			}
			if ready == nil || ready.Status != metav1.ConditionFalse || !strings.Contains(ready.Message, tc.condition) {
				t.Errorf("Ready = %+v, want False naming %s", ready, tc.condition)
			}
			e.pool.Spec.Template.Spec.NodeClassRef.Name = "broken"
			if _, err := e.provider.Create(context.Background(), e.nodeClaim("nc")); !cloudprovider.IsNodeClassNotReadyError(err) {
				t.Errorf("Create with a class that is not ready: %v, want NodeClassNotReady", err)
			}
		})
	}
}

func TestInstanceTypesAndOfferings(t *testing.T) {
	e := newEnv(t, defaultClass("default"))
	e.resolve(t, "default")
	types, err := e.provider.GetInstanceTypes(context.Background(), e.pool)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*catalog.InstanceType{}
	for _, it := range types {
		byName[it.Name] = it
	}
	if len(types) != len(fewTypes) {
		t.Errorf("%d types, want %d", len(types), len(fewTypes))
	}
	m5 := byName["m5.large"]
	if m5 == nil {
		t.Fatal("no m5.large")
	}
	// Karpenter's published m5.large: 2 CPU, 29 pods, allocatable 1930m and
	// 6903Mi (after the 7.5 % VM overhead, kube-reserved and eviction).
	if m5.Capacity.Pods().Value() != 29 || m5.Allocatable.Cpu().MilliValue() != 1930 {
		t.Errorf("m5.large capacity %v allocatable %v", m5.Capacity, m5.Allocatable)
	}
	for k, v := range map[string]string{awsv1.LabelInstanceCategory: "m", awsv1.LabelInstanceGeneration: "5", awsv1.LabelInstanceFamily: "m5",
		awsv1.LabelInstanceSize: "large", corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux"} {
		if m5.Labels[k] != v {
			t.Errorf("m5.large label %s = %q, want %q", k, m5.Labels[k], v)
		}
	}
	prices := map[string]float64{}
	for _, o := range m5.Offerings {
		prices[o.CapacityType+"/"+o.Zone] = o.Price
	}
	if prices["on-demand/us-east-1a"] != 0.096 || prices["spot/us-east-1b"] != 0.031002 || len(prices) != 6 {
		t.Errorf("m5.large offerings %v: want on-demand $0.096 and spot prices from the spot price history in 3 zones", prices)
	}
	if g := byName["g5.xlarge"]; g == nil || g.Capacity.Name("nvidia.com/gpu", resource.DecimalSI).Value() != 1 {
		t.Errorf("g5.xlarge: %v, want 1 nvidia.com/gpu", g)
	}
}

func TestCreateLaunchesTheCheapestSpotOfferingThroughAFleet(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, defaultClass("default"))
	e.resolve(t, "default")
	got, err := e.provider.Create(ctx, e.nodeClaim("web-1", req(corev1.LabelArchStable, "amd64"), req("karpenter.k8s.aws/instance-gpu-count", "0")))
	if err != nil {
		t.Fatal(err)
	}
	// The cheapest amd64 type for 1 CPU among the few: t3.micro (2 vCPUs)
	// spot in us-east-1b at $0.004802.
	if got.Labels[corev1.LabelInstanceTypeStable] != "t3.micro" || got.Labels[corev1.LabelTopologyZone] != "us-east-1b" || got.Labels[karpv1.LabelCapacityType] != "spot" {
		t.Errorf("launched %s in %s as %s", got.Labels[corev1.LabelInstanceTypeStable], got.Labels[corev1.LabelTopologyZone], got.Labels[karpv1.LabelCapacityType])
	}
	instances := e.fake.Instances()
	if len(instances) != 1 {
		t.Fatalf("%d instances, want 1", len(instances))
	}
	in := instances[0]
	if got.Status.ProviderID != "aws:///us-east-1b/"+in.ID || in.Tags["karpenter.sh/nodeclaim"] != "web-1" || in.Tags["karpenter.sh/nodepool"] != "default" ||
		in.Tags["kubernetes.io/cluster/demo"] != "owned" || in.Tags["eks:eks-cluster-name"] != "demo" {
		t.Errorf("provider ID %s, instance %+v", got.Status.ProviderID, in)
	}
	if !strings.Contains(in.UserData, "kind: NodeConfig") || !strings.Contains(in.UserData, "name: demo") || !strings.Contains(in.UserData, "karpenter.sh/nodepool=default") {
		t.Errorf("user data is not an AL2023 NodeConfig for cluster demo and pool default:\n%s", in.UserData)
	}
	if in.InstanceProfile != nodeclass.ProfileName("demo", "us-east-1", "default") || len(in.SecurityGroups) != 1 || !strings.HasPrefix(in.ImageID, "ami-") {
		t.Errorf("instance profile %q, security groups %v, image %q", in.InstanceProfile, in.SecurityGroups, in.ImageID)
	}
	// A second launch of the same shape reuses the launch template.
	if _, err := e.provider.Create(ctx, e.nodeClaim("web-2", req(corev1.LabelArchStable, "amd64"), req("karpenter.k8s.aws/instance-gpu-count", "0"))); err != nil {
		t.Fatal(err)
	}
	if n := e.fake.Requests("CreateLaunchTemplate"); n != 1 {
		t.Errorf("CreateLaunchTemplate called %d times, want 1", n)
	}
}

func TestCreateFallsBackToOnDemandAndReportsInsufficientCapacity(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, defaultClass("default"))
	e.resolve(t, "default")
	only := req(corev1.LabelInstanceTypeStable, "m5.large")
	for _, z := range []string{"us-east-1a", "us-east-1b", "us-east-1c"} {
		e.fake.InsufficientCapacity("m5.large", z, "spot", true)
	}
	_, err := e.provider.Create(ctx, e.nodeClaim("spot-1", only))
	if !cloudprovider.IsInsufficientCapacityError(err) || len(cloudprovider.RefusedOfferings(err)) != 3 {
		t.Fatalf("Create with no spot capacity: %v (refused %v), want insufficient capacity naming 3 spot offerings", err, cloudprovider.RefusedOfferings(err))
	}
	// A NodeClaim narrowed to on-demand (as the solver narrows it once
	// spot is marked unavailable) launches on-demand.
	got, err := e.provider.Create(ctx, e.nodeClaim("od-1", only, req(karpv1.LabelCapacityType, "on-demand")))
	if err != nil || got.Labels[karpv1.LabelCapacityType] != "on-demand" {
		t.Errorf("on-demand launch: %v, %v", got, err)
	}
	// A provider that sees the core's unavailable offerings leaves the
	// refused spot offerings out of the next fleet: a NodeClaim still
	// allowing both goes on-demand in one call.
	refused := map[string]bool{}
	for _, z := range []string{"us-east-1a", "us-east-1b", "us-east-1c"} {
		refused["m5.large/"+z+"/spot"] = true
	}
	aware, err := awsprovider.New(e.kube, ec2.NewFromConfig(e.cfg), awsprovider.Options{ClusterName: "demo", Clock: e.clock,
		Unavailable: func(it, zone, ct string) bool { return refused[it+"/"+zone+"/"+ct] }})
	if err != nil {
		t.Fatal(err)
	}
	fleets := e.fake.Requests("CreateFleet")
	got, err = aware.Create(ctx, e.nodeClaim("both-1", only))
	if err != nil || got.Labels[karpv1.LabelCapacityType] != "on-demand" || e.fake.Requests("CreateFleet") != fleets+1 {
		t.Errorf("with spot marked unavailable: %v, %v after %d fleets; want on-demand in one", got, err, e.fake.Requests("CreateFleet")-fleets)
	}
}

func TestGetListDeleteAndGarbage(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, defaultClass("default"))
	e.resolve(t, "default")
	got, err := e.provider.Create(ctx, e.nodeClaim("keep"))
	if err != nil {
		t.Fatal(err)
	}
	listed, err := e.provider.List(ctx)
	if err != nil || len(listed) != 1 || listed[0].Name != "keep" || listed[0].Status.ProviderID != got.Status.ProviderID {
		t.Fatalf("List = %v, %v", listed, err)
	}
	if err := e.provider.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	if listed, _ := e.provider.List(ctx); len(listed) != 0 {
		t.Errorf("List after Delete: %d instances, want 0", len(listed))
	}
	if _, err := e.provider.Get(ctx, got.Status.ProviderID); !cloudprovider.IsNodeClaimNotFoundError(err) {
		t.Errorf("Get after Delete: %v, want NodeClaimNotFound", err)
	}
}

func TestDrift(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, defaultClass("default"))
	e.resolve(t, "default")
	nc := e.nodeClaim("drifting")
	got, err := e.provider.Create(ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	nc.Annotations, nc.Status = got.Annotations, got.Status
	if r, err := e.provider.IsDrifted(ctx, nc); err != nil || r != "" {
		t.Fatalf("fresh instance drifted: %q, %v", r, err)
	}
	update := func(change func(*awsv1.EC2NodeClass)) {
		t.Helper()
		class := &awsv1.EC2NodeClass{}
		if err := e.kube.Get(ctx, client.ObjectKey{Name: "default"}, class); err != nil {
			t.Fatal(err)
		}
		change(class)
		if err := e.kube.Update(ctx, class); err != nil {
			t.Fatal(err)
		}
		e.resolve(t, "default")
	}
	// A new image for the alias (a pinned, older release) is AMI drift.
	update(func(c *awsv1.EC2NodeClass) {
		c.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "bottlerocket@latest"}}
	})
	if r, _ := e.provider.IsDrifted(ctx, nc); r != awsprovider.DriftAMI {
		t.Errorf("after the AMI changed: %q, want %s", r, awsprovider.DriftAMI)
	}
	update(func(c *awsv1.EC2NodeClass) {
		c.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}}
		c.Spec.Tags = map[string]string{"team": "a"}
	})
	if r, _ := e.provider.IsDrifted(ctx, nc); r != awsprovider.DriftNodeClass {
		t.Errorf("after spec.tags changed: %q, want %s", r, awsprovider.DriftNodeClass)
	}
	// Drift checks share one description of the cluster's instances a
	// minute, however many NodeClaims are checked.
	e.clock.Step(2 * time.Minute)
	unstamped := nc.DeepCopy()
	unstamped.Annotations = nil // no hash to compare: the instance is looked at
	before := e.fake.Requests("DescribeInstances")
	for range 20 {
		if _, err := e.provider.IsDrifted(ctx, unstamped); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.fake.Requests("DescribeInstances") - before; n != 1 {
		t.Errorf("20 drift checks made %d DescribeInstances calls, want 1", n)
	}
}

func TestDeletingANodeClassCleansUpAfterItsNodeClaims(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, defaultClass("default"))
	e.resolve(t, "default")
	nc := e.nodeClaim("last")
	if _, err := e.provider.Create(ctx, nc); err != nil {
		t.Fatal(err)
	}
	if err := e.kube.Create(ctx, nc); err != nil {
		t.Fatal(err)
	}
	class := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	if err := e.kube.Delete(ctx, class); err != nil {
		t.Fatal(err)
	}
	res, err := e.classes.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: "default"}})
	if err != nil || res.RequeueAfter == 0 {
		t.Fatalf("with a NodeClaim left: %v, %v; want a wait", res, err)
	}
	// One template per image the launch could use (amd64, arm64, NVIDIA).
	if n := len(e.fake.LaunchTemplates()); n != 3 {
		t.Fatalf("%d launch templates, want the class's 3 to stay while its NodeClaims do", n)
	}
	if err := e.kube.Delete(ctx, nc); err != nil {
		t.Fatal(err)
	}
	if _, err := e.classes.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: "default"}}); err != nil {
		t.Fatal(err)
	}
	if lts := e.fake.LaunchTemplates(); len(lts) != 0 {
		t.Errorf("launch templates left: %v", lts)
	}
	profile := nodeclass.ProfileName("demo", "us-east-1", "default")
	if slices.ContainsFunc(e.fake.InstanceProfiles(), func(p fake.InstanceProfile) bool { return p.Name == profile }) {
		t.Errorf("instance profile %s left", profile)
	}
	if slices.ContainsFunc(e.fake.InstanceProfiles(), func(p fake.InstanceProfile) bool { return p.Name == "KarpenterNodeRole-demo" }) == false {
		t.Error("the user's own instance profile was deleted")
	}
	if err := e.kube.Get(ctx, client.ObjectKey{Name: "default"}, class); err == nil {
		t.Errorf("the class is still there with finalizers %v", class.Finalizers)
	}
}

// On-demand prices come from the Pricing API, over the embedded table;
// when the API fails the table's prices stand.
func TestOnDemandPricesFromThePricingAPI(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, defaultClass("default"))
	e.resolve(t, "default")
	table := map[string]float64{"m5.large": 9.99}
	priceOf := func(p *awsprovider.Provider) float64 {
		t.Helper()
		types, err := p.GetInstanceTypes(ctx, e.pool)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range types {
			for _, o := range it.Offerings {
				if it.Name == "m5.large" && o.CapacityType == karpv1.CapacityTypeOnDemand {
					return o.Price
				}
			}
		}
		t.Fatal("no on-demand m5.large offering")
		return 0
	}
	withAPI, err := awsprovider.New(e.kube, ec2.NewFromConfig(e.cfg), awsprovider.Options{ClusterName: "demo", OnDemandPrices: table,
		Pricing: pricing.NewFromConfig(e.cfg), Clock: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	if got := priceOf(withAPI); got != 0.096 || e.fake.Requests("GetProducts") < 1 {
		t.Errorf("m5.large on-demand $%v after %d GetProducts pages, want the Pricing API's $0.096", got, e.fake.Requests("GetProducts"))
	}
	e.fake.Fail("GetProducts", fake.Unavailable, 100)
	failing, err := awsprovider.New(e.kube, ec2.NewFromConfig(e.cfg), awsprovider.Options{ClusterName: "demo", OnDemandPrices: table,
		Pricing: pricing.NewFromConfig(e.cfg), Clock: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	if got := priceOf(failing); got != 9.99 {
		t.Errorf("m5.large on-demand $%v with the Pricing API down, want the table's $9.99", got)
	}
}

// Launch templates nobody launched from for 10 minutes are deleted, and
// made again when needed.
func TestUnusedLaunchTemplatesAreCleanedUp(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, defaultClass("default"))
	e.resolve(t, "default")
	amd64 := req(corev1.LabelArchStable, "amd64")
	noGPU := req("karpenter.k8s.aws/instance-gpu-count", "0")
	if _, err := e.provider.Create(ctx, e.nodeClaim("a", amd64, noGPU)); err != nil {
		t.Fatal(err)
	}
	if n, err := e.provider.CleanupLaunchTemplates(ctx); err != nil || n != 0 || len(e.fake.LaunchTemplates()) != 1 {
		t.Fatalf("a template just used: deleted %d (%v), %d left; want it kept", n, err, len(e.fake.LaunchTemplates()))
	}
	e.clock.Step(awsprovider.TemplateIdle + time.Second)
	if n, err := e.provider.CleanupLaunchTemplates(ctx); err != nil || n != 1 || len(e.fake.LaunchTemplates()) != 0 {
		t.Fatalf("a template idle for %s: deleted %d (%v), %d left; want it gone", awsprovider.TemplateIdle, n, err, len(e.fake.LaunchTemplates()))
	}
	if _, err := e.provider.Create(ctx, e.nodeClaim("b", amd64, noGPU)); err != nil {
		t.Fatalf("launching after the cleanup: %v", err)
	}
	if len(e.fake.LaunchTemplates()) != 1 {
		t.Errorf("%d templates after a new launch, want it made again", len(e.fake.LaunchTemplates()))
	}
	// A template an earlier run made and this one never used goes once
	// it is older than the idle time.
	fresh, err := awsprovider.New(e.kube, ec2.NewFromConfig(e.cfg), awsprovider.Options{ClusterName: "demo", Clock: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Step(awsprovider.TemplateIdle + time.Second)
	if n, err := fresh.CleanupLaunchTemplates(ctx); err != nil || n != 1 {
		t.Errorf("a template of an earlier run: deleted %d (%v), want 1", n, err)
	}
}

// The seed's block device mapping and a metadataOptions override reach
// the launch template; a Bottlerocket class gets TOML user data.
func TestLaunchTemplateCarriesTheClassSettings(t *testing.T) {
	ctx := context.Background()
	class := defaultClass("custom")
	size := resource.MustParse("100Gi")
	class.Spec.BlockDeviceMappings = []*awsv1.BlockDeviceMapping{{DeviceName: aws.String("/dev/xvda"), EBS: &awsv1.BlockDevice{
		VolumeSize: &size, VolumeType: aws.String("gp3"), IOPS: aws.Int64(3000), Throughput: aws.Int64(125), Encrypted: aws.Bool(true), DeleteOnTermination: aws.Bool(true)}}}
	class.Spec.MetadataOptions = &awsv1.MetadataOptions{HTTPTokens: aws.String("optional"), HTTPPutResponseHopLimit: aws.Int64(2)}
	e := newEnv(t, class)
	e.pool.Spec.Template.Spec.NodeClassRef.Name = "custom"
	e.resolve(t, "custom")
	if _, err := e.provider.Create(ctx, e.nodeClaim("a", req(corev1.LabelArchStable, "amd64"), req("karpenter.k8s.aws/instance-gpu-count", "0"))); err != nil {
		t.Fatal(err)
	}
	lts := e.fake.LaunchTemplates()
	if len(lts) != 1 {
		t.Fatalf("%d launch templates, want 1", len(lts))
	}
	lt := lts[0]
	// 100Gi is a 100 GiB volume (EC2 sizes are GiB).
	want := fake.BlockDevice{DeviceName: "/dev/xvda", VolumeType: "gp3", VolumeSize: "100", Encrypted: "true", DeleteOnTermination: "true"}
	if len(lt.BlockDevices) != 1 || lt.BlockDevices[0] != want {
		t.Errorf("block devices %+v, want %+v", lt.BlockDevices, want)
	}
	if lt.HTTPTokens != "optional" || lt.HTTPPutResponseHopLimit != "2" || lt.HTTPEndpoint != "enabled" {
		t.Errorf("metadata options: tokens %q, hop limit %q, endpoint %q", lt.HTTPTokens, lt.HTTPPutResponseHopLimit, lt.HTTPEndpoint)
	}

	class = defaultClass("rocket")
	class.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "bottlerocket@latest"}}
	e = newEnv(t, class)
	e.pool.Spec.Template.Spec.NodeClassRef.Name = "rocket"
	e.resolve(t, "rocket")
	if _, err := e.provider.Create(ctx, e.nodeClaim("b", req(corev1.LabelArchStable, "amd64"), req("karpenter.k8s.aws/instance-gpu-count", "0"))); err != nil {
		t.Fatal(err)
	}
	in := e.fake.Instances()[0]
	if !strings.Contains(in.UserData, "[settings.kubernetes]") || !strings.Contains(in.UserData, `cluster-name = "demo"`) {
		t.Errorf("Bottlerocket user data:\n%s", in.UserData)
	}
	if lts := e.fake.LaunchTemplates(); len(lts[0].BlockDevices) != 2 {
		t.Errorf("Bottlerocket block devices %+v, want its OS and data volumes", lts[0].BlockDevices)
	}
}
