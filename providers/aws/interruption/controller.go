package interruption

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/controller/termination"
	"github.com/nodewright/nodewright/internal/disruption"
	"github.com/nodewright/nodewright/internal/metrics"
)

// SQS is what the controller asks of SQS; *sqs.Client satisfies it.
type SQS interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, opts ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
}

// Replacer plans new places for a going node's pods and creates the
// NodeClaims that takes (the provisioner). An error wrapping
// ErrTryAgain means it could not decide now.
type Replacer interface {
	ProvisionFor(ctx context.Context, node string, pods []*corev1.Pod) ([]*karpv1.NodeClaim, error)
}

// Unavailable remembers offerings that cannot be launched for a while.
type Unavailable interface {
	MarkUnavailable(instanceType, zone, capacityType string)
}

// ErrTryAgain is what a Replacer's error wraps when it cannot decide now
// (the provisioner's ErrLaunching).
var ErrTryAgain = errors.New("try again")

// Options configure the controller.
type Options struct {
	// Queue is the SQS queue's name.
	Queue string
	// WaitTime is the long poll of one receive (default 20 s).
	WaitTime time.Duration
	// ShortPoll receives without waiting (a caller that polls on its own
	// clock, as the simulator does).
	ShortPoll bool
}

// Controller handles the interruption queue.
type Controller struct {
	kube        client.Client
	sqs         SQS
	replacer    Replacer
	unavailable Unavailable
	recorder    record.EventRecorder
	metrics     *metrics.Metrics
	clock       clock.Clock
	log         logr.Logger
	opts        Options

	mu sync.Mutex
	// url is the queue's, once looked up.
	url string
	// going are NodeClaims cordoned for an interruption, waiting for their
	// replacements until a deadline.
	going map[string]going
}

type going struct {
	kind         Kind
	deadline     time.Time
	replacements []string
	// replan: the replacements could not be planned yet (another launch
	// was under way); planned again on the next poll.
	replan bool
}

// New wires the controller.
func New(kube client.Client, sqsapi SQS, replacer Replacer, unavailable Unavailable, recorder record.EventRecorder, m *metrics.Metrics,
	clk clock.Clock, log logr.Logger, opts Options) *Controller {
	if opts.WaitTime <= 0 {
		opts.WaitTime = 20 * time.Second
	}
	return &Controller{kube: kube, sqs: sqsapi, replacer: replacer, unavailable: unavailable, recorder: recorder, metrics: m, clock: clk,
		log: log, opts: opts, going: map[string]going{}}
}

// Start polls the queue until ctx ends (a controller-runtime Runnable; it
// needs leader election as the other controllers do).
func (c *Controller) Start(ctx context.Context) error {
	out, err := c.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(c.opts.Queue)})
	if err != nil {
		return fmt.Errorf("interruption queue %s: %w", c.opts.Queue, err)
	}
	url := aws.ToString(out.QueueUrl)
	c.mu.Lock()
	c.url = url
	c.mu.Unlock()
	for ctx.Err() == nil {
		if err := c.Poll(ctx, url); err != nil && ctx.Err() == nil {
			c.log.Error(err, "polling the interruption queue", "queue", c.opts.Queue)
			select {
			case <-ctx.Done():
			case <-c.clock.After(time.Second):
			}
		}
	}
	return nil
}

// PollOnce looks the queue up (the first time) and polls it once: for
// callers that drive the controller on their own clock.
func (c *Controller) PollOnce(ctx context.Context) error {
	c.mu.Lock()
	url := c.url
	c.mu.Unlock()
	if url == "" {
		out, err := c.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(c.opts.Queue)})
		if err != nil {
			return fmt.Errorf("interruption queue %s: %w", c.opts.Queue, err)
		}
		url = aws.ToString(out.QueueUrl)
		c.mu.Lock()
		c.url = url
		c.mu.Unlock()
	}
	return c.Poll(ctx, url)
}

// Poll receives one batch of messages, handles and deletes them, and
// deletes the NodeClaims whose wait is over.
func (c *Controller) Poll(ctx context.Context, url string) error {
	wait := c.opts.WaitTime
	switch {
	case c.opts.ShortPoll:
		wait = 0
	case c.waiting():
		wait = time.Second // look at the cordoned NodeClaims often
	}
	out, err := c.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10,
		WaitTimeSeconds: int32(wait / time.Second), MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameSentTimestamp}})
	if err != nil {
		return fmt.Errorf("receiving from queue %s: %w", c.opts.Queue, err)
	}
	for _, msg := range out.Messages {
		if err := c.handle(ctx, msg); err != nil {
			c.log.Error(err, "handling an interruption message", "message", aws.ToString(msg.MessageId))
			continue // seen again once its visibility timeout passes
		}
		if _, err := c.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: msg.ReceiptHandle}); err != nil {
			return fmt.Errorf("deleting message %s: %w", aws.ToString(msg.MessageId), err)
		}
		c.metrics.InterruptionDeleted()
	}
	return c.finish(ctx)
}

func (c *Controller) waiting() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.going) > 0
}

// handle acts on one message. A message that does not parse is dropped
// (handled); one whose action fails is kept for another try.
func (c *Controller) handle(ctx context.Context, msg sqstypes.Message) error {
	parsed, err := Parse(aws.ToString(msg.Body))
	if err != nil {
		c.log.Error(err, "dropping an interruption message that does not parse", "message", aws.ToString(msg.MessageId))
		c.metrics.InterruptionReceived(string(NoOp), 0)
		return nil
	}
	queued := 0.0
	if ms, err := strconv.ParseInt(msg.Attributes[string(sqstypes.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil {
		queued = max(0, c.clock.Since(time.UnixMilli(ms)).Seconds())
	}
	c.metrics.InterruptionReceived(string(parsed.Kind), queued)
	if parsed.Kind == NoOp {
		return nil
	}
	for _, id := range parsed.InstanceIDs {
		claims := &karpv1.NodeClaimList{}
		if err := c.kube.List(ctx, claims, client.MatchingFields{NodeClaimInstanceIDIndex: id}); err != nil {
			return fmt.Errorf("finding the nodeclaim of instance %s: %w", id, err)
		}
		for i := range claims.Items {
			if err := c.act(ctx, &claims.Items[i], parsed); err != nil {
				return err
			}
		}
	}
	return nil
}

// NodeClaimInstanceIDIndex finds a NodeClaim by its instance's ID (the
// last part of its provider ID), as Karpenter's status.instanceID index.
const NodeClaimInstanceIDIndex = "status.instanceID"

// IndexFields registers the index the controller finds NodeClaims by.
func IndexFields(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &karpv1.NodeClaim{}, NodeClaimInstanceIDIndex, func(o client.Object) []string {
		id := o.(*karpv1.NodeClaim).Status.ProviderID
		if i := strings.LastIndex(id, "/"); i >= 0 && i < len(id)-1 {
			return []string{id[i+1:]}
		}
		return nil
	})
}

// act reports the event on the NodeClaim and, for kinds that end the
// instance, marks a spot offering unavailable, cordons the node, plans
// its pods new places and starts the wait before deletion.
func (c *Controller) act(ctx context.Context, nc *karpv1.NodeClaim, m Message) error {
	c.recorder.Eventf(nc, corev1.EventTypeWarning, m.Kind.Event(), "NodeClaim %s: %s", nc.Name, describe(m.Kind))
	grace, acts := m.Kind.Grace()
	if !acts || nc.DeletionTimestamp != nil {
		return nil
	}
	c.mu.Lock()
	_, already := c.going[nc.Name]
	c.mu.Unlock()
	if already {
		return nil
	}
	if m.Kind == SpotInterrupted && c.unavailable != nil {
		c.unavailable.MarkUnavailable(nc.Labels[corev1.LabelInstanceTypeStable], nc.Labels[corev1.LabelTopologyZone], karpv1.CapacityTypeSpot)
	}
	g := going{kind: m.Kind, deadline: m.Time.Add(grace)}
	if m.Time.IsZero() {
		g.deadline = c.clock.Now().Add(grace)
	}
	if grace > 0 && nc.Status.NodeName != "" {
		replacements, planned, err := c.cordonAndReplace(ctx, nc)
		if err != nil {
			return err
		}
		g.replacements, g.replan = replacements, !planned
	}
	c.mu.Lock()
	c.going[nc.Name] = g
	c.mu.Unlock()
	return nil
}

// cordonAndReplace taints the node so nothing new lands on it and plans
// its pods new places now; planned is false when the planner asked to be
// asked again.
func (c *Controller) cordonAndReplace(ctx context.Context, nc *karpv1.NodeClaim) (replacements []string, planned bool, err error) {
	node := &corev1.Node{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: nc.Status.NodeName}, node); err != nil {
		return nil, true, client.IgnoreNotFound(err)
	}
	if !slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == karpv1.TaintKeyDisrupted }) {
		patch := client.MergeFrom(node.DeepCopy())
		node.Spec.Taints = append(node.Spec.Taints, karpv1.DisruptedNoScheduleTaint)
		if err := c.kube.Patch(ctx, node, patch); err != nil {
			return nil, false, fmt.Errorf("cordoning node %s: %w", node.Name, err)
		}
	}
	pods := &corev1.PodList{}
	if err := c.kube.List(ctx, pods, client.MatchingFields{termination.PodNodeNameIndex: node.Name}); err != nil {
		return nil, false, fmt.Errorf("listing the pods of node %s: %w", node.Name, err)
	}
	// The pods a drain moves: running ones, not DaemonSet or static pods.
	var live []*corev1.Pod
	for i := range pods.Items {
		if p := &pods.Items[i]; p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			live = append(live, p)
		}
	}
	moving := disruption.Reschedulable(live)
	if len(moving) == 0 || c.replacer == nil {
		return nil, true, nil
	}
	created, err := c.replacer.ProvisionFor(ctx, node.Name, moving)
	switch {
	case errors.Is(err, ErrTryAgain):
		return nil, false, nil
	case err != nil:
		c.log.Error(err, "planning replacement capacity for an interrupted node; its pods will be placed once evicted", "node", node.Name)
	}
	var names []string
	for _, r := range created {
		names = append(names, r.Name)
	}
	c.log.Info("interrupted node cordoned, replacement capacity launching", "node", node.Name, "NodeClaim", nc.Name, "pods", len(moving), "replacements", names)
	return names, true, nil
}

// finish deletes the cordoned NodeClaims whose replacements are up or
// whose deadline has come.
func (c *Controller) finish(ctx context.Context) error {
	c.mu.Lock()
	names := make([]string, 0, len(c.going))
	for name := range c.going {
		names = append(names, name)
	}
	c.mu.Unlock()
	slices.Sort(names)
	now := c.clock.Now()
	for _, name := range names {
		c.mu.Lock()
		g := c.going[name]
		c.mu.Unlock()
		nc := &karpv1.NodeClaim{}
		if err := c.kube.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
			if client.IgnoreNotFound(err) != nil {
				return err
			}
			c.forget(name)
			continue
		}
		if g.replan && now.Before(g.deadline) {
			replacements, planned, err := c.cordonAndReplace(ctx, nc)
			if err != nil {
				return err
			}
			g.replacements, g.replan = replacements, !planned
			c.mu.Lock()
			c.going[name] = g
			c.mu.Unlock()
		}
		if now.Before(g.deadline) && (g.replan || !c.replacementsUp(ctx, g.replacements)) {
			continue
		}
		if err := c.kube.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting interrupted nodeclaim %s: %w", name, err)
		}
		c.recorder.Eventf(nc, corev1.EventTypeWarning, "TerminatingOnInterruption", "NodeClaim %s: %s", nc.Name, describe(g.kind))
		c.metrics.NodeClaimDisrupted(nc, string(g.kind))
		c.log.Info("deleting an interrupted NodeClaim", "NodeClaim", name, "kind", g.kind, "replacements", g.replacements)
		c.forget(name)
	}
	return nil
}

func (c *Controller) forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.going, name)
}

// replacementsUp: every replacement is initialized (or gone: it failed,
// and waiting for it helps nobody).
func (c *Controller) replacementsUp(ctx context.Context, names []string) bool {
	for _, name := range names {
		nc := &karpv1.NodeClaim{}
		if err := c.kube.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
			continue
		}
		if !meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeInitialized) {
			return false
		}
	}
	return true
}

func describe(k Kind) string {
	switch k {
	case SpotInterrupted:
		return "the spot instance is being interrupted"
	case Rebalance:
		return "EC2 recommends rebalancing this spot instance (no action)"
	case ScheduledChange:
		return "AWS Health scheduled a change for the instance"
	case InstanceStopped:
		return "the instance is stopping"
	case InstanceTerminated:
		return "the instance is terminating"
	}
	return string(k)
}
