package simulator

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/sched"
	"github.com/nodewright/nodewright/pkg/catalog"
)

// unreadyPoolsTake finds, among the pods the provisioner leaves
// unschedulable, those a NodePool it skips as not Ready would take: the
// pool's Ready condition is Nodewright's own write, so it is no excuse
// when the pool's NodeClass exists. The pools are solved as Ready, on the
// simulation's catalog, next to the Ready ones; it returns, per pod, why
// it counts and the pool.
func (c *checker) unreadyPoolsTake(ctx context.Context, pods map[types.NamespacedName]bool) map[types.NamespacedName][2]string {
	if len(pods) == 0 {
		return nil
	}
	snap := c.e.components.Cluster.Snapshot()
	pools, ready, err := c.e.components.Provisioner.Pools(ctx, snap)
	if err != nil {
		return nil
	}
	catalogTypes := make([]*catalog.InstanceType, 0, len(c.e.opts.InstanceTypes))
	for i := range c.e.opts.InstanceTypes {
		catalogTypes = append(catalogTypes, &c.e.opts.InstanceTypes[i])
	}
	unready := map[string]bool{}
	for _, np := range snap.NodePools {
		if ready[np.Name] != nil || !c.nodeClassExists(ctx, np.Spec.Template.Spec.NodeClassRef) {
			continue
		}
		unready[np.Name] = true
		pools = append(pools, sched.NodePool{NodePool: np, InstanceTypes: catalogTypes, Usage: snap.Usage[np.Name]})
	}
	if len(unready) == 0 {
		return nil
	}
	snap.Nodes = append(slices.Clip(snap.Nodes), snap.Unlaunched...)
	plan := sched.Solve(snap.Input(pools))
	out := map[types.NamespacedName][2]string{}
	for _, nc := range plan.NodeClaims {
		if !unready[nc.NodePool] {
			continue
		}
		for _, p := range nc.Pods {
			if k := client.ObjectKeyFromObject(p); pods[k] {
				out[k] = [2]string{fmt.Sprintf("nodepool %s would take it on a new %s, but is not Ready though its NodeClass exists", nc.NodePool, nc.InstanceType), nc.NodePool}
			}
		}
	}
	return out
}

// nodeClassExists: the NodeClass a NodePool names is in the API (whatever
// its status says) and not being deleted, of a kind this simulation's
// cloud provider launches for.
func (c *checker) nodeClassExists(ctx context.Context, ref *karpv1.NodeClassReference) bool {
	if ref == nil {
		return false
	}
	if c.e.opts.CloudProvider == "aws" && ref.Kind != "EC2NodeClass" {
		return false
	}
	mapping, err := c.e.store.RESTMapper().RESTMapping(schema.GroupKind{Group: ref.Group, Kind: ref.Kind})
	if err != nil {
		return false
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(mapping.GroupVersionKind)
	if err := c.e.store.Get(ctx, client.ObjectKey{Name: ref.Name}, obj); err != nil {
		return false
	}
	return obj.GetDeletionTimestamp() == nil
}
