package aws

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	awsv1 "github.com/nodewright/nodewright/api/aws/v1"
	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/pkg/catalog"
)

// A NodeClaim gets one instance however often Create is called for it (a
// status write that failed after the launch, a conflict, a restart, an
// answer lost on the way back). Two mechanisms keep it so:
//
//   - Create first looks for a live instance tagged for the cluster and
//     the NodeClaim (its name and its UID), and returns it if there is
//     one (adoption). An instance tagged with the name of an earlier
//     NodeClaim (another UID) is not adopted: garbage collection reaps it;
//   - the fleet request carries a client token derived from the
//     NodeClaim's UID, so EC2 answers a repeated request with the first
//     answer instead of launching again. DescribeInstances is eventually
//     consistent and may not show a new instance for a while: the token
//     covers that window.
//
// Tokens are numbered, and a NodeClaim moves on to token k+1 only once
// token k is known to have launched nothing alive:
//
//   - its answer said nothing was launched (such an answer is final for
//     its token: EC2 replays it);
//   - its answer named instances that are already shutting down or
//     terminated (a replayed answer of a launch whose instance died since;
//     an instance EC2 does not describe yet is not dead);
//   - EC2 refused it with IdempotentParameterMismatch (an earlier attempt
//     with that token asked for something else: an offering marked
//     unavailable meanwhile, a refreshed price order, changed user data),
//     and Options.DescribeConsistencyWindow has passed since the first
//     such refusal while no live instance is described for the NodeClaim.
//     Whatever the token's first use launched was launched before that
//     first refusal, so DescribeInstances shows it by then.
//
// The token number and the first refusals are kept in memory only: a
// restart starts again from token 0 and replays the same sequence (each
// refused token waiting its window again), so no token is ever new while
// an instance launched under an earlier one may be unseen.

// maxClientToken is EC2's limit on a client token's length (ASCII).
const maxClientToken = 64

// launchAttempts are the NodeClaims whose fleets launched nothing, by
// key, with the token number their next attempt uses, and the tokens EC2
// refused with IdempotentParameterMismatch.
type launchAttempts struct {
	next map[string]int
	at   map[string]time.Time
	// mismatched are the tokens refused for other parameters, with the
	// NodeClaim's key and when the first refusal was seen.
	mismatched map[string]mismatch
}

// mismatch is the first IdempotentParameterMismatch seen for a token.
type mismatch struct {
	key string
	at  time.Time
}

func newLaunchAttempts() launchAttempts {
	return launchAttempts{next: map[string]int{}, at: map[string]time.Time{}, mismatched: map[string]mismatch{}}
}

// attemptsKept is how long a NodeClaim's attempt number is remembered
// after its last failure (a NodeClaim not launched by then has timed out).
const attemptsKept = time.Hour

// idempotencyKey names a NodeClaim for its client tokens: its UID (unique
// for ever, unlike its name), or, for a NodeClaim never stored (tests),
// the cluster's name and its own.
func (p *Provider) idempotencyKey(nc *karpv1.NodeClaim) string {
	key := string(nc.UID)
	if key == "" {
		key = "name:" + p.opts.ClusterName + "/" + nc.Name
	}
	if len("nodewright--")+len(key)+3 > maxClientToken || !isASCII(key) {
		sum := sha256.Sum256([]byte(key))
		key = hex.EncodeToString(sum[:16])
	}
	return key
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// clientToken is the CreateFleet client token of the NodeClaim's current
// attempt: nodewright-KEY-N.
func (p *Provider) clientToken(nc *karpv1.NodeClaim) string {
	key := p.idempotencyKey(nc)
	p.attemptsMu.Lock()
	n := p.attempts.next[key]
	p.attemptsMu.Unlock()
	return "nodewright-" + key + "-" + strconv.Itoa(n)
}

// launchedNothing records that the NodeClaim's current token launched
// nothing alive (see above), so its next attempt takes the next token.
func (p *Provider) launchedNothing(nc *karpv1.NodeClaim) {
	key := p.idempotencyKey(nc)
	now := p.clock.Now()
	p.attemptsMu.Lock()
	defer p.attemptsMu.Unlock()
	p.forgetOld(now)
	p.attempts.next[key]++
	p.attempts.at[key] = now
}

// forgetOld drops what is remembered of NodeClaims whose last failure is
// older than attemptsKept. Callers hold attemptsMu.
func (p *Provider) forgetOld(now time.Time) {
	for k, at := range p.attempts.at {
		if now.Sub(at) > attemptsKept {
			delete(p.attempts.next, k)
			delete(p.attempts.at, k)
		}
	}
	for token, m := range p.attempts.mismatched {
		if now.Sub(m.at) > attemptsKept {
			delete(p.attempts.mismatched, token)
		}
	}
}

// mismatchedSince records that EC2 refused the NodeClaim's token for
// other parameters and returns when it first did (in this process).
func (p *Provider) mismatchedSince(nc *karpv1.NodeClaim, token string) time.Time {
	key := p.idempotencyKey(nc)
	now := p.clock.Now()
	p.attemptsMu.Lock()
	defer p.attemptsMu.Unlock()
	if m, ok := p.attempts.mismatched[token]; ok {
		return m.at
	}
	p.forgetOld(now)
	p.attempts.mismatched[token] = mismatch{key: key, at: now}
	return now
}

// launchSettled forgets the NodeClaim's attempts: it launched.
func (p *Provider) launchSettled(nc *karpv1.NodeClaim) {
	key := p.idempotencyKey(nc)
	p.attemptsMu.Lock()
	defer p.attemptsMu.Unlock()
	delete(p.attempts.next, key)
	delete(p.attempts.at, key)
	for token, m := range p.attempts.mismatched {
		if m.key == key {
			delete(p.attempts.mismatched, token)
		}
	}
}

// launchedFor finds the live (pending or running) instance tagged for the
// cluster and the NodeClaim, the oldest if there are several (garbage
// collection terminates the others once the NodeClaim records one).
// An instance tagged with the NodeClaim's name is its own only if it
// carries the NodeClaim's UID too, or, launched before instances carried
// UIDs, if it was launched after the NodeClaim was created: a NodeClaim
// never takes the instance of an earlier NodeClaim of the same name.
func (p *Provider) launchedFor(ctx context.Context, nc *karpv1.NodeClaim) (*ec2types.Instance, error) {
	pages := ec2.NewDescribeInstancesPaginator(p.ec2, &ec2.DescribeInstancesInput{MaxResults: aws.Int32(1000), Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + fmt.Sprintf(tagClusterFmt, p.opts.ClusterName)), Values: []string{"owned"}},
		{Name: aws.String("tag:" + TagNodeClaim), Values: []string{nc.Name}},
		{Name: aws.String("instance-state-name"), Values: []string{string(ec2types.InstanceStateNamePending), string(ec2types.InstanceStateNameRunning)}},
	}})
	var found []ec2types.Instance
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("looking for an instance already launched for nodeclaim %s: %w", nc.Name, err)
		}
		for _, r := range page.Reservations {
			for _, in := range r.Instances {
				if launchedForUID(nc, in) {
					found = append(found, in)
				}
			}
		}
	}
	if len(found) == 0 {
		return nil, nil
	}
	oldest := slices.MinFunc(found, func(a, b ec2types.Instance) int {
		return cmp.Or(aws.ToTime(a.LaunchTime).Compare(aws.ToTime(b.LaunchTime)), cmp.Compare(aws.ToString(a.InstanceId), aws.ToString(b.InstanceId)))
	})
	return &oldest, nil
}

// launchedForUID tells whether an instance tagged with the NodeClaim's
// name was launched for this NodeClaim and not an earlier one of the
// same name.
func launchedForUID(nc *karpv1.NodeClaim, in ec2types.Instance) bool {
	if nc.UID == "" {
		return true // never stored (tests): the name is all there is
	}
	i := slices.IndexFunc(in.Tags, func(t ec2types.Tag) bool { return aws.ToString(t.Key) == TagNodeClaimUID })
	if i >= 0 {
		return aws.ToString(in.Tags[i].Value) == string(nc.UID)
	}
	return !nc.CreationTimestamp.IsZero() && in.LaunchTime != nil && !in.LaunchTime.Before(nc.CreationTimestamp.Time)
}

// deadOnArrival tells whether an instance a fleet answer named is already
// shutting down or terminated: a replayed answer of a launch whose
// instance died since. An instance EC2 does not describe yet is not dead
// (DescribeInstances is eventually consistent).
func (p *Provider) deadOnArrival(ctx context.Context, nc *karpv1.NodeClaim, id string) (bool, error) {
	out, err := p.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if IsErrorCode(err, "InvalidInstanceID.NotFound") {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("launching nodeclaim %s: describing its instance %s: %w", nc.Name, id, err)
	}
	for _, r := range out.Reservations {
		for _, in := range r.Instances {
			if aws.ToString(in.InstanceId) == id && in.State != nil &&
				(in.State.Name == ec2types.InstanceStateNameShuttingDown || in.State.Name == ec2types.InstanceStateNameTerminated) {
				return true, nil
			}
		}
	}
	return false, nil
}

// adopt renders an instance already launched for the NodeClaim as its
// launch result, as if this call had launched it.
func (p *Provider) adopt(class *awsv1.EC2NodeClass, nc *karpv1.NodeClaim, types []*catalog.InstanceType, in *ec2types.Instance) (*karpv1.NodeClaim, error) {
	id := aws.ToString(in.InstanceId)
	i := slices.IndexFunc(types, func(it *catalog.InstanceType) bool { return it.Name == string(in.InstanceType) })
	if i < 0 {
		return nil, fmt.Errorf("launching nodeclaim %s: its instance %s is a %s, which ec2nodeclass %s does not offer", nc.Name, id, in.InstanceType, class.Name)
	}
	zone := ""
	if in.Placement != nil {
		zone = aws.ToString(in.Placement.AvailabilityZone)
	}
	capacityType := karpv1.CapacityTypeOnDemand
	if in.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot {
		capacityType = karpv1.CapacityTypeSpot
	}
	p.launchSettled(nc)
	return p.launched(class, nc, launchOption{it: types[i], zone: zone}, capacityType, id, aws.ToString(in.ImageId)), nil
}
