//go:build integration

package chaos_test

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/nodewright/nodewright/api/aws/v1"
	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/providers/aws/fake"
	"github.com/nodewright/nodewright/test/integration/controlplane"
)

const (
	awsCluster = "chaos"
	awsPool    = "chaos-aws"
	awsApp     = "chaos-aws"
	// loseRate is the share of CreateFleet calls whose instances are
	// launched but whose answer the caller never gets.
	loseRate = 0.3
	// loseFlag is the fake-aws flag that injects those lost answers.
	loseFlag = "--lose-launch-responses"
	// describeLag keeps new instances out of DescribeInstances for a while,
	// as EC2's eventual consistency does.
	describeLag = time.Second
)

// The controller (aws provider, against `nodewright fake-aws`, whose
// instances join the control plane) is SIGKILLed 20 times and restarted
// at once while an app grows from 4 to 20 pods of one node each, its
// writes to the API fail (apiFaults), 30% of
// CreateFleet answers are lost after the instances were launched, and new
// instances stay out of DescribeInstances for a second. Half
// the kills land just after a NodeClaim appears that has not recorded its
// instance yet. Counting the fake's live instances per
// karpenter.sh/nodeclaim tag (DescribeInstances through the SDK), no
// NodeClaim may own two instances at any instant, and once the controller
// runs undisturbed no instance may stay without a NodeClaim past the
// garbage-collection grace, and every pod runs.
func TestControllerKilledDuringLaunchesWithLostResponsesAWS(t *testing.T) {
	if help, err := exec.Command(nodewrightBin, "fake-aws", "--help").CombinedOutput(); err != nil || !strings.Contains(string(help), loseFlag) {
		t.Skipf("nodewright fake-aws has no %s flag (help: %v): this test needs launches whose answer is lost (issue 13)", loseFlag, err)
	}
	ctx := context.Background()
	seed := chaosSeed(t)
	kube := adminClient(t)
	t.Cleanup(func() {
		controlplane.Cleanup(t, kube, managedLists()...)
		controlplane.Cleanup(t, kube, &awsv1.EC2NodeClassList{})
	})

	fakeAWS := startChild(t, "fake-aws", nodewrightBin, "fake-aws", "--cluster-name", awsCluster, "--kubeconfig", cp.Kubeconfig, "--listen", "127.0.0.1:0",
		"--boot-delay", "1s", loseFlag, strconv.FormatFloat(loseRate, 'f', -1, 64), "--describe-lag", describeLag.String(),
		"--seed", strconv.FormatUint(uint64(seed), 10))
	serving, err := fakeAWS.waitLog(ctx, "fake AWS serving at ", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	endpoint := strings.Fields(serving)[0]
	ec2Client := ec2.NewFromConfig(fake.Config(endpoint))

	create(ctx, t, kube, awsNodeClass(), awsNodePool())
	proxy := faultProxy(t, seed)
	ctrl := startChild(t, "controller", controllerBin, "controller", "--cloud-provider", "aws", "--cluster-name", awsCluster, "--aws-endpoint", endpoint,
		"--kubeconfig", proxy.Kubeconfig, "--leader-elect=false", "--metrics-bind-address", "0", "--health-probe-bind-address", "0",
		"--kwok-kubelet=false", "--batch-idle-duration", "1s", "--batch-max-duration", "5s")
	read := func(ctx context.Context) (*clusterState, error) {
		s, err := readCluster(ctx, kube, awsPool, awsApp)
		if err != nil {
			return nil, err
		}
		s.aws = true
		if s.instances, err = liveInstances(ctx, ec2Client); err != nil {
			return nil, err
		}
		return s, nil
	}
	_, why := settle(ctx, t, "the EC2NodeClass Ready", time.Minute, read, func(*clusterState) []string {
		class := &awsv1.EC2NodeClass{}
		if err := kube.Get(ctx, client.ObjectKey{Name: awsCluster}, class); err != nil {
			return []string{err.Error()}
		}
		if !meta.IsStatusConditionTrue(class.Status.Conditions, "Ready") {
			return []string{fmt.Sprintf("EC2NodeClass %s not Ready: %v", awsCluster, class.Status.Conditions)}
		}
		return nil
	}, ctrl)
	if why != nil {
		t.Fatalf("%v\ncontroller log tail:\n%s", why, ctrl.tail(40))
	}
	mon := startMonitor(t, read, time.Second)
	k := newKiller(t, ctrl, seed)
	launching := func(ctx context.Context) bool {
		s, err := readCluster(ctx, kube, awsPool, awsApp)
		return err == nil && s.launching()
	}

	const step, steps = 4, 5
	create(ctx, t, kube, app(awsApp, awsApp, awsPool, "1", step)) // pods of one CPU: one a node
	for i := range 4 * steps {
		if i > 0 && i%4 == 0 {
			scale(ctx, t, kube, awsApp, int32(step*(i/4+1)))
		}
		if k.coin(0.5) {
			k.killWhen(ctx, "a nodeclaim launching", launching, 10*time.Second, time.Second)
		} else {
			k.randomKill(500*time.Millisecond, 5*time.Second)
		}
	}
	want := step * steps
	var final *clusterState
	final, why = settle(ctx, t, "recovery", 3*time.Minute, read, func(s *clusterState) []string {
		var out []string
		if n, _ := s.running(); n != want {
			out = append(out, fmt.Sprintf("%d of %d pods Running", n, want))
		}
		out = append(out, s.leaked()...)
		out = append(out, s.duplicates()...)
		return append(out, s.unsettled(false)...)
	}, ctrl)
	saw := mon.stop()
	faults := proxy.Counts()
	report(t, seed, k, final, why, saw, fmt.Sprintf("%d live instances at the end; API faults: %s", len(final.instances), faults), want)
	checkFaults(t, seed, faults)
}

// liveInstances lists the fake's pending and running instances.
func liveInstances(ctx context.Context, ec2Client *ec2.Client) ([]instance, error) {
	var out []instance
	pages := ec2.NewDescribeInstancesPaginator(ec2Client, &ec2.DescribeInstancesInput{
		Filters: []ec2types.Filter{{Name: aws.String("instance-state-name"), Values: []string{"pending", "running"}}},
	})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describing instances: %w", err)
		}
		for _, r := range page.Reservations {
			for _, in := range r.Instances {
				live := instance{id: aws.ToString(in.InstanceId), launched: aws.ToTime(in.LaunchTime)}
				if in.State != nil {
					live.state = string(in.State.Name)
				}
				for _, tag := range in.Tags {
					if aws.ToString(tag.Key) == "karpenter.sh/nodeclaim" {
						live.nodeClaim = aws.ToString(tag.Value)
					}
				}
				out = append(out, live)
			}
		}
	}
	return out, nil
}

// awsNodeClass selects the fake account's subnets and security group
// (tagged for the cluster), the current AL2023 AMIs and the cluster's
// node role.
func awsNodeClass() *awsv1.EC2NodeClass {
	discovery := map[string]string{"karpenter.sh/discovery": awsCluster}
	return &awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: awsCluster},
		Spec: awsv1.EC2NodeClassSpec{
			SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: discovery}},
			SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: discovery}},
			AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
			Role:                       "KarpenterNodeRole-" + awsCluster,
		},
	}
}

// awsNodePool buys on-demand c/m "large" instances (2 vCPUs: one of the
// app's pods each) and removes only empty nodes.
func awsNodePool() *karpv1.NodePool {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: awsPool}}
	np.Spec.Template.ObjectMeta.Labels = map[string]string{"node-type": awsPool}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: awsCluster}
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: karpv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}},
		{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
		{Key: awsv1.LabelInstanceCategory, Operator: corev1.NodeSelectorOpIn, Values: []string{"c", "m"}},
		{Key: awsv1.LabelInstanceSize, Operator: corev1.NodeSelectorOpIn, Values: []string{"large"}},
	}
	np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
	np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("30s")
	return np
}
