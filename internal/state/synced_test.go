package state

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// A new model has not synced; it syncs when its feed says so, falls back
// when the feed says it is behind, and counts how long it has been
// incomplete.
func TestSyncGate(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	c := NewCluster(clk)
	clk.Step(time.Minute)
	if c.Synced() || c.UnsyncedFor() != time.Minute {
		t.Fatalf("a new model: synced %v, unsynced for %v; want false, 1m (since its creation)", c.Synced(), c.UnsyncedFor())
	}
	complete := false
	c.SetSyncedFunc(func() bool { return complete })
	if c.Synced() {
		t.Fatal("synced while the feed says it is not complete")
	}
	complete = true
	if !c.Synced() || c.UnsyncedFor() != 0 {
		t.Fatalf("feed complete: synced %v, unsynced for %v", c.Synced(), c.UnsyncedFor())
	}
	clk.Step(time.Hour)
	complete = false
	c.Synced()
	clk.Step(10 * time.Second)
	if c.Synced() || c.UnsyncedFor() != 10*time.Second {
		t.Fatalf("fallen behind: synced %v, unsynced for %v; want false, 10s", c.Synced(), c.UnsyncedFor())
	}
	c.MarkSynced()
	if !c.Synced() {
		t.Fatal("MarkSynced did not sync the model")
	}
}

// HoldsAll is the feed's check that every NodeClaim and Node the API has
// reached the model; extra objects in the model (a deletion not seen yet)
// do not matter.
func TestHoldsAll(t *testing.T) {
	c := NewCluster(clocktesting.NewFakeClock(epoch))
	c.UpdateNodeClaim(claim("web-1", "default", "kwok://web-1", true))
	c.UpdateNodeClaim(claim("web-gone", "default", "kwok://web-gone", true))
	c.UpdateNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "web-1"}})
	cases := []struct {
		name          string
		claims, nodes []string
		want          bool
	}{
		{"everything", []string{"web-1"}, []string{"web-1"}, true},
		{"a NodeClaim not delivered yet", []string{"web-1", "web-2"}, []string{"web-1"}, false},
		{"a Node not delivered yet", []string{"web-1"}, []string{"web-1", "web-2"}, false},
		{"an empty cluster", nil, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := c.HoldsAll(tc.claims, tc.nodes); got != tc.want {
				t.Errorf("HoldsAll = %v, want %v", got, tc.want)
			}
		})
	}
}

// A NodeClaim not launched yet is capacity on its way for provisioning:
// the room it was sized for, holding the pods nominated onto it. It is
// not among the nodes disruption plans with.
func TestUnlaunchedClaimsAreCapacityOnItsWay(t *testing.T) {
	c := NewCluster(clocktesting.NewFakeClock(epoch))
	nc := claim("web-launching", "default", "", false)
	nc.Spec.Resources.Requests = capacity("2")
	c.UpdateNodeClaim(nc)
	deleting := claim("web-deleting", "default", "", false)
	deleting.DeletionTimestamp = &metav1.Time{Time: epoch}
	deleting.Finalizers = []string{"keep"}
	c.UpdateNodeClaim(deleting)
	planned, waiting := unschedulable("planned"), unschedulable("waiting")
	c.UpdatePod(planned)
	c.UpdatePod(waiting)
	c.Nominate([]*corev1.Pod{planned}, nc.Name, time.Minute)

	snap := c.Snapshot()
	if len(snap.Nodes) != 0 {
		t.Errorf("nodes %+v: an unlaunched claim is no node disruption may count on", snap.Nodes)
	}
	if len(snap.Unlaunched) != 1 {
		t.Fatalf("unlaunched %+v, want web-launching only (not the claim being deleted)", snap.Unlaunched)
	}
	u := snap.Unlaunched[0]
	if u.Name != nc.Name || !u.InFlight || u.NodePool != "default" || u.Allocatable.Cpu().String() != "2" || names(u.Pods) != "planned" ||
		u.Labels[corev1.LabelTopologyZone] != "zone-a" {
		t.Errorf("unlaunched %+v: want in-flight, the requested room, the planned pod, the zone it asked for", u)
	}
	if names(snap.Pending) != "waiting" {
		t.Errorf("pending %q", names(snap.Pending))
	}
}
