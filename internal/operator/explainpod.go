package operator

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/state"
)

// PodExplanation says where a pod stands and why: bound, waiting for
// kube-scheduler, placed by the plan, or with no NodePool able to launch
// a node for it (each pool's reason).
type PodExplanation struct {
	Pod string
	// Verdict is one sentence: what happens to the pod.
	Verdict string
	// Pools are the NodePools, each with what it would do for the pod.
	Pools []string
	// Events are the pod's latest events from kube-scheduler and Nodewright.
	Events []string
}

// Write prints the explanation.
func (e PodExplanation) Write(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Pod %s: %s\n", e.Pod, e.Verdict)
	if len(e.Pools) > 0 {
		b.WriteString("NodePools:\n")
		for _, p := range e.Pools {
			fmt.Fprintf(&b, "  %s\n", p)
		}
	}
	if len(e.Events) > 0 {
		b.WriteString("Recent events:\n")
		for _, ev := range e.Events {
			fmt.Fprintf(&b, "  %s\n", ev)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ExplainPod reads a live cluster once into the model the controllers use
// and says why a pod is pending (or where it runs), solving as the
// provisioner would without creating anything. conf gives the instance
// types; the clock, logger and provider are set here.
func ExplainPod(ctx context.Context, restConfig *rest.Config, conf Config, namespace, name string) (PodExplanation, error) {
	kube, scheme, err := liveClient(restConfig)
	if err != nil {
		return PodExplanation{}, err
	}
	out := PodExplanation{Pod: namespace + "/" + name}
	pod := &corev1.Pod{}
	if err := kube.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pod); err != nil {
		return out, fmt.Errorf("reading pod %s: %w", out.Pod, err)
	}
	out.Events = podEvents(ctx, kube, pod)
	switch {
	case pod.Spec.NodeName != "":
		out.Verdict = boundVerdict(ctx, kube, pod)
		return out, nil
	case pod.DeletionTimestamp != nil:
		out.Verdict = "it is being deleted"
		return out, nil
	case ownerKind(pod) == "DaemonSet":
		out.Verdict = "it is a DaemonSet pod: its node comes first, Nodewright counts it as overhead of every node it launches"
		return out, nil
	case !unschedulable(pod) && !state.SchedulerBehind(pod, time.Now()):
		out.Verdict = "kube-scheduler has not marked it unschedulable (PodScheduled=False, reason Unschedulable) yet; " +
			fmt.Sprintf("Nodewright provisions for pods kube-scheduler could not place, or has not looked at %s after their creation", state.SchedulerBacklogGrace)
		if len(pod.Spec.SchedulingGates) > 0 {
			out.Verdict = fmt.Sprintf("it is held by scheduling gates %v: kube-scheduler does not try it until they are removed", gateNames(pod))
		}
		return out, nil
	}

	components, err := liveComponents(ctx, kube, scheme, conf)
	if err != nil {
		return out, err
	}
	plan, err := components.Provisioner.Plan(ctx)
	if err != nil {
		return out, fmt.Errorf("planning: %w", err)
	}
	var pools karpv1.NodePoolList
	if err := kube.List(ctx, &pools); err != nil {
		return out, fmt.Errorf("listing nodepools: %w", err)
	}
	reasons := map[string]string{}
	isPod := func(p *corev1.Pod) bool { return p.Namespace == pod.Namespace && p.Name == pod.Name }
	for _, nc := range plan.NodeClaims {
		if slices.ContainsFunc(nc.Pods, isPod) {
			options := nc.InstanceTypeOptions
			if len(options) > 5 {
				options = append(slices.Clone(options[:5]), fmt.Sprintf("... %d more", len(nc.InstanceTypeOptions)-5))
			}
			out.Verdict = fmt.Sprintf("Nodewright would launch a node for it in NodePool %s: %s in %s (%s, $%.4f/h) for %d pod(s); instance types %s",
				nc.NodePool, nc.InstanceType, nc.Zone, nc.CapacityType, nc.Price, len(nc.Pods), strings.Join(options, ", "))
		}
	}
	for _, e := range plan.Existing {
		if slices.ContainsFunc(e.Pods, isPod) {
			out.Verdict = fmt.Sprintf("it fits on %s (a node or a NodeClaim launching): kube-scheduler places it there once that node is Ready and has the room", e.Node)
		}
	}
	for _, u := range plan.Unschedulable {
		if isPod(u.Pod) {
			out.Verdict = "no NodePool can launch a node for it"
			for _, part := range strings.Split(u.Reason, "; ") {
				if pool, why, ok := strings.Cut(strings.TrimPrefix(part, "NodePool "), ": "); ok && strings.HasPrefix(part, "NodePool ") {
					reasons[pool] = why
				} else if out.Verdict == "no NodePool can launch a node for it" {
					out.Verdict += ": " + part
				}
			}
		}
	}
	if out.Verdict == "" {
		out.Verdict = "it is waiting for a decision already made (nominated to a NodeClaim launching); see its events"
	}
	for _, np := range pools.Items {
		line := "NodePool " + np.Name + ": "
		switch ready := meta.FindStatusCondition(np.Status.Conditions, karpv1.ConditionTypeReady); {
		case np.DeletionTimestamp != nil:
			line += "being deleted, not considered"
		case ready == nil || ready.Status != "True":
			msg := "no Ready condition yet"
			if ready != nil {
				msg = ready.Message
			}
			line += "not Ready, not considered (" + msg + ")"
		case reasons[np.Name] != "":
			line += reasons[np.Name]
		default:
			line += "could launch a node for it"
		}
		out.Pools = append(out.Pools, line)
	}
	return out, nil
}

func boundVerdict(ctx context.Context, kube client.Client, pod *corev1.Pod) string {
	node := &corev1.Node{}
	if err := kube.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, node); err != nil {
		return fmt.Sprintf("it is bound to node %s (%v)", pod.Spec.NodeName, err)
	}
	verdict := fmt.Sprintf("it is bound to node %s (%s", node.Name, node.Labels[corev1.LabelInstanceTypeStable])
	if pool := node.Labels[karpv1.LabelNodePool]; pool != "" {
		verdict += ", NodePool " + pool
	}
	return verdict + fmt.Sprintf("), phase %s", pod.Status.Phase)
}

func unschedulable(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
	})
}

func ownerKind(p *corev1.Pod) string {
	if ref := metav1.GetControllerOf(p); ref != nil {
		return ref.Kind
	}
	return ""
}

func gateNames(p *corev1.Pod) []string {
	var out []string
	for _, g := range p.Spec.SchedulingGates {
		out = append(out, g.Name)
	}
	return out
}

// podEvents are the pod's last few events, oldest first.
func podEvents(ctx context.Context, kube client.Client, pod *corev1.Pod) []string {
	var events corev1.EventList
	if err := kube.List(ctx, &events, client.InNamespace(pod.Namespace), client.MatchingFields{"involvedObject.name": pod.Name}); err != nil {
		return nil
	}
	slices.SortFunc(events.Items, func(a, b corev1.Event) int { return a.LastTimestamp.Compare(b.LastTimestamp.Time) })
	var out []string
	for _, e := range events.Items {
		if e.InvolvedObject.UID != pod.UID {
			continue
		}
		out = append(out, fmt.Sprintf("%s %s (%s): %s", e.Type, e.Reason, e.Source.Component, e.Message))
	}
	if len(out) > 5 {
		out = out[len(out)-5:]
	}
	return out
}
