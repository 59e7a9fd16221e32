package kwok_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	awsv1 "github.com/nodewright/nodewright/api/aws/v1"
	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	kwokv1alpha1 "github.com/nodewright/nodewright/api/kwok/v1alpha1"
	"github.com/nodewright/nodewright/pkg/catalog"
	"github.com/nodewright/nodewright/pkg/cloudprovider"
	"github.com/nodewright/nodewright/pkg/cloudprovider/providertest"
	"github.com/nodewright/nodewright/providers/kwok"
)

func scheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, karpv1.AddToScheme, kwokv1alpha1.AddToScheme, awsv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// smallCatalog: two types, spot and on-demand in two zones.
func smallCatalog(t *testing.T) []catalog.InstanceType {
	t.Helper()
	types, err := catalog.Parse("test", []byte(`[
	  {"name": "c-2x-amd64-linux", "architecture": "amd64", "operatingSystems": ["linux"],
	   "resources": {"cpu": "2", "memory": "4Gi", "pods": "32"},
	   "offerings": [{"capacityType": "spot", "zone": "zone-a", "price": 0.05}, {"capacityType": "on-demand", "zone": "zone-a", "price": 0.08},
	                 {"capacityType": "spot", "zone": "zone-b", "price": 0.06}, {"capacityType": "on-demand", "zone": "zone-b", "price": 0.08}]},
	  {"name": "c-8x-amd64-linux", "architecture": "amd64", "operatingSystems": ["linux"],
	   "resources": {"cpu": "8", "memory": "16Gi", "pods": "110"},
	   "offerings": [{"capacityType": "spot", "zone": "zone-a", "price": 0.2}, {"capacityType": "on-demand", "zone": "zone-b", "price": 0.32}]}
	]`))
	if err != nil {
		t.Fatal(err)
	}
	return types
}

type env struct {
	kube     client.Client
	provider *kwok.Provider
	pool     *karpv1.NodePool
}

func newEnv(t *testing.T, objs ...client.Object) env {
	t.Helper()
	class := &kwokv1alpha1.KWOKNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	kube := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(append([]client.Object{class}, objs...)...).
		WithInterceptorFuncs(interceptor.Funcs{Create: stampCreation}).Build()
	pool := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	pool.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: kwokv1alpha1.Group, Kind: "KWOKNodeClass", Name: "default"}
	return env{kube: kube, provider: kwok.New(kube, smallCatalog(t)), pool: pool}
}

func (e env) nodeClaim(name string, extra ...karpv1.NodeSelectorRequirementWithMinValues) *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.LabelNodePool: e.pool.Name}}}
	nc.Spec.NodeClassRef = e.pool.Spec.Template.Spec.NodeClassRef
	nc.Spec.Requirements = append([]karpv1.NodeSelectorRequirementWithMinValues{
		{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"c-2x-amd64-linux", "c-8x-amd64-linux"}},
		{Key: karpv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot", "on-demand"}},
		{Key: karpv1.LabelNodePool, Operator: corev1.NodeSelectorOpIn, Values: []string{e.pool.Name}},
	}, extra...)
	nc.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	return nc
}

func TestContract(t *testing.T) {
	providertest.Run(t, func(t *testing.T) providertest.Harness {
		e := newEnv(t)
		return providertest.Harness{Provider: e.provider, NodePool: e.pool, NodeClaim: e.nodeClaim}
	})
}

func TestCreateMakesAnUnregisteredNode(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	got, err := e.provider.Create(ctx, e.nodeClaim("web-1"))
	if err != nil {
		t.Fatal(err)
	}
	// The cheapest offering that holds 1 CPU: c-2x spot in zone-a at $0.05.
	if got.Labels[corev1.LabelInstanceTypeStable] != "c-2x-amd64-linux" || got.Labels[corev1.LabelTopologyZone] != "zone-a" || got.Labels[karpv1.LabelCapacityType] != "spot" {
		t.Errorf("launched %v", got.Labels)
	}
	node := &corev1.Node{}
	if err := e.kube.Get(ctx, client.ObjectKey{Name: "web-1"}, node); err != nil {
		t.Fatal(err)
	}
	if node.Spec.ProviderID != "kwok://web-1" || got.Status.ProviderID != node.Spec.ProviderID {
		t.Errorf("provider IDs: node %q, claim %q", node.Spec.ProviderID, got.Status.ProviderID)
	}
	if len(node.Spec.Taints) != 1 || node.Spec.Taints[0] != karpv1.UnregisteredNoExecuteTaint {
		t.Errorf("node taints %v, want only %v", node.Spec.Taints, karpv1.UnregisteredNoExecuteTaint)
	}
	if node.Labels[karpv1.LabelNodePool] != "default" || node.Labels[corev1.LabelHostname] != "web-1" || node.Status.Allocatable.Cpu().MilliValue() != 1900 {
		t.Errorf("node labels %v, allocatable %v", node.Labels, node.Status.Allocatable)
	}
	// Creating again (a retried launch) finds the same node.
	again, err := e.provider.Create(ctx, e.nodeClaim("web-1"))
	if err != nil || again.Status.ProviderID != got.Status.ProviderID {
		t.Errorf("second Create: %v, %v", again, err)
	}
	nodes := &corev1.NodeList{}
	if err := e.kube.List(ctx, nodes); err != nil || len(nodes.Items) != 1 {
		t.Errorf("%d nodes after two Creates for one NodeClaim", len(nodes.Items))
	}
}

func TestRefusedOfferingsFallBackOrFail(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	cheapest := cloudprovider.Offering{InstanceType: "c-2x-amd64-linux", Zone: "zone-a", CapacityType: "spot"}
	e.provider.RefuseOffering(cheapest)
	got, err := e.provider.Create(ctx, e.nodeClaim("a"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels[corev1.LabelTopologyZone] != "zone-b" || got.Labels[karpv1.LabelCapacityType] != "spot" {
		t.Errorf("with the cheapest offering refused, launched %v; want the next, spot in zone-b", got.Labels)
	}
	onlyCheapest := e.nodeClaim("b",
		karpv1.NodeSelectorRequirementWithMinValues{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-a"}},
		karpv1.NodeSelectorRequirementWithMinValues{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"c-2x-amd64-linux"}},
		karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot"}})
	_, err = e.provider.Create(ctx, onlyCheapest)
	if !cloudprovider.IsInsufficientCapacityError(err) {
		t.Fatalf("only the refused offering allowed: %v, want insufficient capacity", err)
	}
	if refused := cloudprovider.RefusedOfferings(err); len(refused) != 1 || refused[0] != cheapest {
		t.Errorf("refused offerings %v, want [%v]", refused, cheapest)
	}
	e.provider.AllowOffering(cheapest)
	if _, err := e.provider.Create(ctx, onlyCheapest); err != nil {
		t.Errorf("after AllowOffering: %v", err)
	}
}

func TestNodeClassStates(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	nc := e.nodeClaim("x")
	nc.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: kwokv1alpha1.Group, Kind: "KWOKNodeClass", Name: "missing"}
	if _, err := e.provider.Create(ctx, nc); !cloudprovider.IsInsufficientCapacityError(err) {
		t.Errorf("missing KWOKNodeClass: %v, want insufficient capacity", err)
	}
	notReady := &kwokv1alpha1.KWOKNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "broken"}}
	notReady.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Broken", Message: "under repair", LastTransitionTime: metav1.Now()}}
	e = newEnv(t, notReady)
	nc = e.nodeClaim("y")
	nc.Spec.NodeClassRef.Name = "broken"
	if _, err := e.provider.Create(ctx, nc); !cloudprovider.IsNodeClassNotReadyError(err) {
		t.Errorf("KWOKNodeClass not Ready: %v, want NodeClassNotReadyError", err)
	}
}

// stampCreation sets creationTimestamp on create, as the API server does
// (the fake client leaves it empty).
func stampCreation(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
	obj.SetCreationTimestamp(metav1.Now())
	return c.Create(ctx, obj, opts...)
}

// ServeEC2NodeClasses lets NodePools written for AWS launch kwok nodes (the
// simulator plays AWS manifests this way); without it they are not kwok's.
func TestServeEC2NodeClasses(t *testing.T) {
	ctx := context.Background()
	ec2 := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	e := newEnv(t, ec2)
	ref := &karpv1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"}
	if cloudprovider.Manages(e.provider, ref) {
		t.Fatal("the kwok provider manages EC2NodeClass pools by default")
	}
	nc := e.nodeClaim("aws")
	nc.Spec.NodeClassRef = ref
	if _, err := e.provider.Create(ctx, nc); !cloudprovider.IsInsufficientCapacityError(err) {
		t.Errorf("EC2NodeClass claim without ServeEC2NodeClasses: %v, want refused", err)
	}
	e.provider.ServeEC2NodeClasses()
	if !cloudprovider.Manages(e.provider, ref) {
		t.Fatal("ServeEC2NodeClasses: EC2NodeClass pools still not managed")
	}
	launched, err := e.provider.Create(ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	if launched.Status.ProviderID == "" {
		t.Errorf("launched %+v: no provider ID", launched.Status)
	}
	missing := e.nodeClaim("aws-missing")
	missing.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "nope"}
	if _, err := e.provider.Create(ctx, missing); !cloudprovider.IsInsufficientCapacityError(err) || !strings.Contains(err.Error(), "EC2NodeClass nope not found") {
		t.Errorf("missing EC2NodeClass: %v", err)
	}
}
