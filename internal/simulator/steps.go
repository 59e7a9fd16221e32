package simulator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/nodewright/nodewright/api/aws/v1"
	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	kwokv1alpha1 "github.com/nodewright/nodewright/api/kwok/v1alpha1"
	"github.com/nodewright/nodewright/internal/manifest"
	"github.com/nodewright/nodewright/pkg/cloudprovider"
)

// kinds a step may name, by Kind.
var kinds = map[string]func() client.Object{
	"Deployment": func() client.Object { return &appsv1.Deployment{} }, "ReplicaSet": func() client.Object { return &appsv1.ReplicaSet{} },
	"StatefulSet": func() client.Object { return &appsv1.StatefulSet{} }, "DaemonSet": func() client.Object { return &appsv1.DaemonSet{} },
	"Job": func() client.Object { return &batchv1.Job{} }, "Pod": func() client.Object { return &corev1.Pod{} },
	"Node": func() client.Object { return &corev1.Node{} }, "Namespace": func() client.Object { return &corev1.Namespace{} },
	"NodePool": func() client.Object { return &karpv1.NodePool{} }, "NodeClaim": func() client.Object { return &karpv1.NodeClaim{} },
	"KWOKNodeClass": func() client.Object { return &kwokv1alpha1.KWOKNodeClass{} }, "EC2NodeClass": func() client.Object { return &awsv1.EC2NodeClass{} },
	"PersistentVolumeClaim": func() client.Object { return &corev1.PersistentVolumeClaim{} },
	"StorageClass":          func() client.Object { return &storagev1.StorageClass{} },
	"PodDisruptionBudget":   func() client.Object { return &policyv1.PodDisruptionBudget{} },
}

// Reason for NodeClaims a scenario interrupts.
const ReasonInterrupted = "interrupted"

// Load applies the input's initial manifests now and schedules its steps.
func (e *Engine) Load(ctx context.Context, in *Input) error {
	if err := e.Apply(ctx, in.Initial); err != nil {
		return err
	}
	for i, step := range in.Scenario.Spec.Steps {
		e.At(time.Duration(step.At), func() error {
			if err := e.run(ctx, step, in.StepManifests[i]); err != nil {
				return fmt.Errorf("%s: spec.steps[%d] (at %s): %w", in.Source, i, time.Duration(step.At), err)
			}
			return nil
		})
	}
	return nil
}

// run performs one step; manifests are an apply step's.
func (e *Engine) run(ctx context.Context, s Step, manifests *manifest.Set) error {
	kube := e.store
	switch {
	case len(s.Apply) > 0:
		e.report.step("apply " + strings.Join(s.Apply, ", "))
		return e.Apply(ctx, manifests)
	case s.Delete != nil:
		obj := kinds[s.Delete.Kind]()
		obj.SetName(s.Delete.Name)
		obj.SetNamespace(e.namespaceFor(obj, s.Delete.Namespace))
		e.report.step(fmt.Sprintf("delete %s %s", s.Delete.Kind, client.ObjectKeyFromObject(obj)))
		if err := kube.Delete(ctx, obj); err != nil {
			return fmt.Errorf("deleting %s %s: %w", s.Delete.Kind, client.ObjectKeyFromObject(obj), err)
		}
	case s.Scale != nil:
		obj := kinds[s.Scale.Kind]()
		key := client.ObjectKey{Name: s.Scale.Name, Namespace: e.namespaceFor(obj, s.Scale.Namespace)}
		if err := kube.Get(ctx, key, obj); err != nil {
			return fmt.Errorf("scaling %s %s: %w", s.Scale.Kind, key, err)
		}
		replicas := s.Scale.Replicas
		switch o := obj.(type) {
		case *appsv1.Deployment:
			o.Spec.Replicas = &replicas
		case *appsv1.ReplicaSet:
			o.Spec.Replicas = &replicas
		case *appsv1.StatefulSet:
			o.Spec.Replicas = &replicas
		}
		e.report.step(fmt.Sprintf("scale %s %s to %d", s.Scale.Kind, key, replicas))
		if err := kube.Update(ctx, obj); err != nil {
			return fmt.Errorf("scaling %s %s: %w", s.Scale.Kind, key, err)
		}
	case s.Jobs != nil:
		return e.createJobs(ctx, s.Jobs)
	case s.Cordon != nil:
		nodes, err := e.selectNodes(ctx, *s.Cordon, "")
		if err != nil {
			return err
		}
		e.report.step(fmt.Sprintf("cordon %d node(s)", len(nodes)))
		for _, n := range nodes {
			patch := client.MergeFrom(n.DeepCopy())
			n.Spec.Unschedulable = true
			if err := kube.Patch(ctx, n, patch); err != nil {
				return fmt.Errorf("cordoning node %s: %w", n.Name, err)
			}
		}
	case s.DeleteNodes != nil:
		nodes, err := e.selectNodes(ctx, *s.DeleteNodes, "")
		if err != nil {
			return err
		}
		e.report.step(fmt.Sprintf("delete %d node(s)", len(nodes)))
		for _, n := range nodes {
			if err := kube.Delete(ctx, n); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting node %s: %w", n.Name, err)
			}
		}
	case s.Interrupt != nil:
		nodes, err := e.selectNodes(ctx, *s.Interrupt, karpv1.CapacityTypeSpot)
		if err != nil {
			return err
		}
		e.report.step(fmt.Sprintf("interrupt %d spot node(s)", len(nodes)))
		return e.interrupt(ctx, nodes)
	case s.InsufficientCapacity != nil:
		offerings := e.offerings(*s.InsufficientCapacity)
		if len(offerings) == 0 {
			return fmt.Errorf("insufficientCapacity: no offering of %s in the catalog matches", s.InsufficientCapacity.InstanceType)
		}
		e.report.step(fmt.Sprintf("%d offering(s) of %s out of capacity", len(offerings), s.InsufficientCapacity.InstanceType))
		for _, o := range offerings {
			e.components.KWOK.RefuseOffering(o)
			e.refuse(o, true)
			if e.aws != nil {
				e.aws.InsufficientCapacity(o.InstanceType, o.Zone, o.CapacityType, true)
			}
		}
	case s.RestoreCapacity != nil:
		offerings := e.offerings(*s.RestoreCapacity)
		e.report.step(fmt.Sprintf("%d offering(s) of %s have capacity again", len(offerings), s.RestoreCapacity.InstanceType))
		for _, o := range offerings {
			e.components.KWOK.AllowOffering(o)
			e.refuse(o, false)
			if e.aws != nil {
				e.aws.InsufficientCapacity(o.InstanceType, o.Zone, o.CapacityType, false)
			}
		}
	case s.PatchNodePool != nil:
		np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: s.PatchNodePool.Name}}
		e.report.step("patch nodepool " + s.PatchNodePool.Name)
		if err := kube.Patch(ctx, np, client.RawPatch(types.MergePatchType, s.PatchNodePool.Patch)); err != nil {
			return fmt.Errorf("patching nodepool %s: %w", s.PatchNodePool.Name, err)
		}
	}
	return nil
}

// interrupt reclaims spot nodes: with aws the fake AWS sends the warning
// and Nodewright's interruption controller handles it; with kwok their
// NodeClaims are deleted, as Karpenter does on the notice.
func (e *Engine) interrupt(ctx context.Context, nodes []*corev1.Node) error {
	kube := e.store
	var claims karpv1.NodeClaimList
	if err := kube.List(ctx, &claims); err != nil {
		return err
	}
	for _, n := range nodes {
		if e.aws != nil {
			if err := e.aws.Send(e.opts.ClusterName, "spot-interruption", n.Spec.ProviderID[strings.LastIndex(n.Spec.ProviderID, "/")+1:]); err != nil {
				return fmt.Errorf("interrupting node %s: %w", n.Name, err)
			}
			continue
		}
		for i := range claims.Items {
			nc := &claims.Items[i]
			if nc.Status.NodeName != n.Name || nc.DeletionTimestamp != nil {
				continue
			}
			if info := e.report.claims[nc.Name]; info != nil {
				info.reason = ReasonInterrupted
			}
			if err := kube.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("interrupting nodeclaim %s: %w", nc.Name, err)
			}
		}
	}
	return nil
}

// namespaceFor is ns, or default for a namespaced kind.
func (e *Engine) namespaceFor(obj client.Object, ns string) string {
	if namespaced, _ := e.store.IsObjectNamespaced(obj); !namespaced {
		return ""
	}
	if ns == "" {
		return metav1.NamespaceDefault
	}
	return ns
}

// selectNodes picks nodes: by name, else the oldest Count (all when 0)
// matching the NodePool and capacity type (defaultCapacityType when the
// selection gives none).
func (e *Engine) selectNodes(ctx context.Context, sel NodeSelection, defaultCapacityType string) ([]*corev1.Node, error) {
	var list corev1.NodeList
	if err := e.store.List(ctx, &list); err != nil {
		return nil, err
	}
	ct := sel.CapacityType
	if ct == "" {
		ct = defaultCapacityType
	}
	var out []*corev1.Node
	for i := range list.Items {
		n := &list.Items[i]
		switch {
		case n.DeletionTimestamp != nil:
		case len(sel.Names) > 0:
			if slices.Contains(sel.Names, n.Name) {
				out = append(out, n)
			}
		case (sel.NodePool == "" || n.Labels[karpv1.LabelNodePool] == sel.NodePool) && (ct == "" || n.Labels[karpv1.LabelCapacityType] == ct):
			out = append(out, n)
		}
	}
	for _, name := range sel.Names {
		if !slices.ContainsFunc(out, func(n *corev1.Node) bool { return n.Name == name }) {
			return nil, fmt.Errorf("node %s: not found", name)
		}
	}
	slices.SortStableFunc(out, func(a, b *corev1.Node) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	if sel.Count > 0 && len(out) > sel.Count {
		out = out[:sel.Count]
	}
	return out, nil
}

// offerings are the catalog's offerings o names.
func (e *Engine) offerings(o Offering) []cloudprovider.Offering {
	var out []cloudprovider.Offering
	for _, it := range e.opts.InstanceTypes {
		if it.Name != o.InstanceType {
			continue
		}
		for _, off := range it.Offerings {
			if (o.Zone == "" || off.Zone == o.Zone) && (o.CapacityType == "" || off.CapacityType == o.CapacityType) {
				out = append(out, cloudprovider.Offering{InstanceType: it.Name, Zone: off.Zone, CapacityType: off.CapacityType})
			}
		}
	}
	return out
}

// createJobs makes the Jobs a jobs step describes.
func (e *Engine) createJobs(ctx context.Context, j *Jobs) error {
	count := max(j.Count, 1)
	parallelism := max(j.Parallelism, 1)
	completions := j.Completions
	if completions == 0 {
		completions = parallelism
	}
	requests := corev1.ResourceList{}
	if j.CPU != nil {
		requests[corev1.ResourceCPU] = *j.CPU
	}
	if j.Memory != nil {
		requests[corev1.ResourceMemory] = *j.Memory
	}
	e.report.step(fmt.Sprintf("create %d job(s) %s: %d pods of %s each", count, j.Name, completions, time.Duration(j.Duration)))
	for i := range count {
		name := j.Name
		if count > 1 {
			name = fmt.Sprintf("%s-%d", j.Name, i+1)
		}
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.namespaceFor(&batchv1.Job{}, j.Namespace),
			Annotations: map[string]string{AnnotationJobDuration: time.Duration(j.Duration).String()}},
			Spec: batchv1.JobSpec{Parallelism: &parallelism, Completions: &completions, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"job-name": name}},
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, NodeSelector: j.NodeSelector,
					Containers: []corev1.Container{{Name: "job", Image: "busybox", Resources: corev1.ResourceRequirements{Requests: requests}}}}}}}
		if err := e.create(ctx, job); err != nil {
			return err
		}
	}
	return nil
}
