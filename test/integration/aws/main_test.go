//go:build integration

// Package aws_test runs Nodewright with its AWS provider against a real
// control plane and the in-repo fake AWS, whose instances join the
// cluster as Nodes: the seed's manifests, applied as a user would, must
// behave as the seed describes.
package aws_test

import (
	"context"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/nodewright/nodewright/api/aws/v1"
	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/manifest"
	"github.com/nodewright/nodewright/internal/operator"
	"github.com/nodewright/nodewright/internal/sched"
	"github.com/nodewright/nodewright/providers/aws/fake"
	"github.com/nodewright/nodewright/test/integration/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.Main(m, controlplane.Options{ControllerManager: true, Scheduler: true}, &cp))
}

const clusterName = "demo"

// cloud is a fake AWS whose instances join the control plane, and
// Nodewright's controllers using it.
type cloud struct {
	fake *fake.Server
	kube client.Client
}

// start serves a fake AWS on loopback, has its instances join the control
// plane, and runs the controllers with the aws provider against it.
func start(t *testing.T) *cloud { return startWith(t, func(*operator.Config) {}) }

// startWith is start with the configuration changed by configure.
func startWith(t *testing.T, configure func(*operator.Config)) *cloud {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	server, err := fake.New(fake.Options{World: fake.DefaultWorld(clusterName)})
	if err != nil {
		t.Fatal(err)
	}
	endpoint := httptest.NewServer(server)
	scheme, err := operator.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	kube, err := client.New(cp.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	conf := operator.Config{
		CloudProvider: "aws", AWS: operator.AWSConfig{SDK: fake.Config(endpoint.URL), ClusterName: clusterName},
		BatchIdle: 2 * time.Second, BatchMax: 10 * time.Second, MinValuesPolicy: sched.MinValuesStrict,
		MetricsAddr: "0", HealthAddr: "0", Logger: logr.Discard(), Embedded: true,
	}
	if os.Getenv("NODEWRIGHT_TEST_LOG") != "" {
		conf.Logger = testr.NewWithOptions(t, testr.Options{Verbosity: 1})
	}
	configure(&conf)
	done := make(chan error, 2)
	go func() { done <- operator.Run(ctx, cp.Config, conf) }()
	go func() { done <- server.Join(ctx, cp.Config, time.Second) }()
	t.Cleanup(func() {
		cancel()
		for range 2 {
			if err := <-done; err != nil {
				t.Errorf("controllers or machines: %v", err)
			}
		}
		endpoint.Close()
		controlplane.Cleanup(t, kube, &appsv1.DeploymentList{}, &corev1.PodList{}, &karpv1.NodeClaimList{}, &corev1.NodeList{}, &karpv1.NodePoolList{}, &awsv1.EC2NodeClassList{})
	})
	return &cloud{fake: server, kube: kube}
}

// apply creates the objects of manifests as a user would, with
// ${CLUSTER_NAME} substituted.
func apply(ctx context.Context, t *testing.T, kube client.Client, files ...string) {
	t.Helper()
	set := &manifest.Set{}
	for _, f := range files {
		raw, err := os.ReadFile("../../../testdata/seed/" + f)
		if err != nil {
			t.Fatal(err)
		}
		if err := set.Add(f, []byte(strings.ReplaceAll(string(raw), "${CLUSTER_NAME}", clusterName))); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	var objs []client.Object
	for _, o := range set.EC2NodeClasses {
		objs = append(objs, o)
	}
	for _, o := range set.NodePools {
		objs = append(objs, o)
	}
	for _, o := range set.Deployments {
		objs = append(objs, o)
	}
	for _, o := range objs {
		if err := kube.Create(ctx, o); err != nil {
			t.Fatalf("creating %s %s: %v", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
		}
	}
}

func waitFor(ctx context.Context, t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, cond); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
