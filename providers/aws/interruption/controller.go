package interruption

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
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
	reader      client.Reader
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
	// deciding: some NodeClaim carried an interruption decision still to
	// carry out at the last look (a hint, the API holds the decisions):
	// the queue is then polled every second so their waits end on time. It
	// starts true, so a restarted controller looks at the decisions it
	// inherits at once.
	deciding bool
	// recorded: this poll recorded a decision.
	recorded bool
	// unrecorded are replacements planned whose names could not be written
	// on their NodeClaim yet, by claimKey.
	unrecorded map[string][]string
	// unplanned are the planned marks this controller wrote, or may have
	// written (the answer was lost), without having planned the
	// replacements yet, by claimKey: a mark found with that value is its
	// own to plan.
	unplanned map[string]string
	// warned holds, by claimKey, the unknown kind already reported.
	warned map[string]string
}

// New wires the controller.
func New(kube client.Client, sqsapi SQS, replacer Replacer, unavailable Unavailable, recorder record.EventRecorder, m *metrics.Metrics,
	clk clock.Clock, log logr.Logger, opts Options) *Controller {
	if opts.WaitTime <= 0 {
		opts.WaitTime = 20 * time.Second
	}
	return &Controller{kube: kube, reader: kube, sqs: sqsapi, replacer: replacer, unavailable: unavailable, recorder: recorder, metrics: m, clock: clk,
		log: log, opts: opts, deciding: true, unrecorded: map[string][]string{}, unplanned: map[string]string{}, warned: map[string]string{}}
}

// WithAPIReader makes the controller read through r, an uncached reader
// (the manager's APIReader), where a lagging cache would mislead it: the
// re-read after a write conflict and whether a replacement still exists.
// Without one it reads through its client.
func (c *Controller) WithAPIReader(r client.Reader) *Controller {
	if r != nil {
		c.reader = r
	}
	return c
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

// Poll receives one batch of messages, records the decision each one
// calls for on its NodeClaims and only then deletes it, and then advances
// every recorded decision (cordon, replacements, deletion when they are up
// or the deadline has come). A message whose decision could not be
// recorded stays on the queue: SQS hands it out again once its visibility
// timeout passes.
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
	var errs []error
	for _, msg := range out.Messages {
		if err := c.handle(ctx, msg); err != nil {
			errs = append(errs, fmt.Errorf("handling interruption message %s (kept for another try): %w", aws.ToString(msg.MessageId), err))
			continue
		}
		if _, err := c.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: msg.ReceiptHandle}); err != nil {
			// Its decision is recorded: handling it again changes nothing.
			errs = append(errs, fmt.Errorf("deleting interruption message %s: %w", aws.ToString(msg.MessageId), err))
			continue
		}
		c.metrics.InterruptionDeleted()
	}
	return errors.Join(append(errs, c.advanceAll(ctx))...)
}

func (c *Controller) waiting() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deciding
}

// handle records on each NodeClaim of the message's instances the
// decision it calls for. A message that does not parse is dropped
// (handled); one whose decision could not be recorded is an error.
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

// NodeClaimInterruptedIndex finds the NodeClaims that carry an
// interruption decision (value "true").
const NodeClaimInterruptedIndex = "metadata.annotations." + AnnotationInterruption

// IndexFields registers the indexes the controller finds NodeClaims by.
func IndexFields(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &karpv1.NodeClaim{}, NodeClaimInstanceIDIndex, func(o client.Object) []string {
		id := o.(*karpv1.NodeClaim).Status.ProviderID
		if i := strings.LastIndex(id, "/"); i >= 0 && i < len(id)-1 {
			return []string{id[i+1:]}
		}
		return nil
	}); err != nil {
		return err
	}
	return indexer.IndexField(ctx, &karpv1.NodeClaim{}, NodeClaimInterruptedIndex, func(o client.Object) []string {
		if _, ok := o.GetAnnotations()[AnnotationInterruption]; ok {
			return []string{"true"}
		}
		return nil
	})
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
