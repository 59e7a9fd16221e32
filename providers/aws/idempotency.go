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
//     the NodeClaim, and returns it if there is one (adoption);
//   - the fleet request carries a client token derived from the
//     NodeClaim's UID, so EC2 answers a repeated request with the first
//     answer instead of launching again. DescribeInstances is eventually
//     consistent and may not show a new instance for a while: the token
//     covers that window.
//
// A repeated request whose parameters changed (an offering marked
// unavailable meanwhile, a refreshed price order) is refused by EC2 with
// IdempotentParameterMismatch; Create then fails, launching nothing, until
// the first launch's instance is described and adopted (or the NodeClaim
// times out and garbage collection terminates the instance).
//
// EC2 replays a fleet that answered "launched nothing" too. Such an answer
// is final for its token, so after one (other than insufficient capacity,
// which deletes the NodeClaim) the next attempt uses the next token of
// the NodeClaim: tokens are numbered, and token k+1 is only ever used
// after token k's answer said nothing was launched. A restart starts
// again from token 0 and replays the same sequence, so no token is ever
// new while an instance launched under an earlier one may be unseen.

// maxClientToken is EC2's limit on a client token's length (ASCII).
const maxClientToken = 64

// launchAttempts are the NodeClaims whose fleets launched nothing, by
// key, with the token number their next attempt uses.
type launchAttempts struct {
	next map[string]int
	at   map[string]time.Time
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

// launchedNothing records that the NodeClaim's current token got a final
// answer that launched nothing, so its next attempt takes the next token.
func (p *Provider) launchedNothing(nc *karpv1.NodeClaim) {
	key := p.idempotencyKey(nc)
	now := p.clock.Now()
	p.attemptsMu.Lock()
	defer p.attemptsMu.Unlock()
	for k, at := range p.attempts.at {
		if now.Sub(at) > attemptsKept {
			delete(p.attempts.next, k)
			delete(p.attempts.at, k)
		}
	}
	p.attempts.next[key]++
	p.attempts.at[key] = now
}

// launchSettled forgets the NodeClaim's attempts: it launched, or it is
// refused for capacity (and deleted).
func (p *Provider) launchSettled(nc *karpv1.NodeClaim) {
	key := p.idempotencyKey(nc)
	p.attemptsMu.Lock()
	defer p.attemptsMu.Unlock()
	delete(p.attempts.next, key)
	delete(p.attempts.at, key)
}

// launchedFor finds the live (pending or running) instance tagged for the
// cluster and the NodeClaim, the oldest if there are several (garbage
// collection terminates the others once the NodeClaim records one).
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
			found = append(found, r.Instances...)
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
