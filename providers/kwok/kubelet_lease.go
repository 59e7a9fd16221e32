package kwok

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// leases remembers when the kubelet last renewed each node's Lease, so it
// renews only when due without reading Leases (nor caching them all).
type leases struct {
	mu      sync.Mutex
	renewed map[string]time.Time
	// forbidden: the kubelet may not write Leases (RBAC); it stops trying
	// and heartbeats through the node's status instead.
	forbidden bool
}

// due reports whether node's lease must be renewed at now, or else how
// long until it must.
func (l *leases) due(node string, now time.Time, interval time.Duration) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	last, ok := l.renewed[node]
	if !ok || now.Sub(last) >= interval {
		return true, 0
	}
	return false, interval - now.Sub(last)
}

func (l *leases) renew(node string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.renewed[node] = now
}

func (l *leases) forget(node string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.renewed, node)
}

func (l *leases) forbid() (first bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	first, l.forbidden = !l.forbidden, true
	return first
}

func (l *leases) isForbidden() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.forbidden
}

// renewLease renews node's Lease in kube-node-lease when due, as a kubelet
// does, and returns when it is next due. The Lease is the kubelet's alone:
// a merge patch of its spec, with no resource version, cannot conflict;
// a missing one is created, owned by the node so that it goes with it.
func (k *Kubelet) renewLease(ctx context.Context, node *corev1.Node, now time.Time) (time.Duration, error) {
	interval := k.opts.HeartbeatInterval
	if k.leases.isForbidden() {
		return interval, nil
	}
	if due, wait := k.leases.due(node.Name, now, interval); !due {
		return wait, nil
	}
	spec := coordinationv1.LeaseSpec{
		HolderIdentity:       &node.Name,
		LeaseDurationSeconds: ptrTo(int32(max(1, (4*interval).Round(time.Second)/time.Second))),
		RenewTime:            ptrTo(metav1.NewMicroTime(now)),
	}
	data, err := json.Marshal(map[string]any{"spec": spec})
	if err != nil {
		return 0, fmt.Errorf("encoding the lease of node %s: %w", node.Name, err)
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: node.Name}}
	err = k.kube.Patch(ctx, lease, client.RawPatch(types.MergePatchType, data))
	if apierrors.IsNotFound(err) {
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: node.Name, OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID,
			}}},
			Spec: spec,
		}
		err = k.kube.Create(ctx, lease)
	}
	switch {
	case apierrors.IsForbidden(err):
		if k.leases.forbid() {
			log.FromContext(ctx).Error(err, "the emulated kubelet may not write node leases; it heartbeats through node status instead", "node", node.Name)
		}
		return interval, nil
	case err != nil:
		return 0, fmt.Errorf("renewing the lease of node %s: %w", node.Name, err)
	}
	k.leases.renew(node.Name, now)
	return interval, nil
}
