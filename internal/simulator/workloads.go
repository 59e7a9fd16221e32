package simulator

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/nodewright/nodewright/internal/controller/watch"
)

// AnnotationJobDuration on a Job (or its pod template) says how long each
// of its pods runs once started, e.g. "10m". Without it pods run 1 minute.
const AnnotationJobDuration = "simulate.nodewright.dev/duration"

// DefaultJobDuration is how long a Job's pod runs without the annotation.
const DefaultJobDuration = time.Minute

// workloadControllers are the stand-ins for kube-controller-manager: just
// enough of Deployments, ReplicaSets, StatefulSets and Jobs to create and
// delete their pods (owned by the workload directly, no ReplicaSet layer).
func workloadControllers(e *Engine) []watch.Controller {
	w := &workloads{engine: e, kube: e.store}
	owned := func(kind string) func(context.Context, client.Object) []reconcile.Request {
		return func(_ context.Context, o client.Object) []reconcile.Request {
			if ref := metav1.GetControllerOf(o); ref != nil && ref.Kind == kind {
				return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: ref.Name}}}
			}
			return nil
		}
	}
	return []watch.Controller{
		{Name: "simulator.deployment", Reconciler: reconcile.Func(w.reconcileDeployment),
			Sources: []watch.Source{watch.For(&appsv1.Deployment{}, nil), watch.Mapped(&corev1.Pod{}, owned("Deployment"))}},
		{Name: "simulator.replicaset", Reconciler: reconcile.Func(w.reconcileReplicaSet),
			Sources: []watch.Source{watch.For(&appsv1.ReplicaSet{}, nil), watch.Mapped(&corev1.Pod{}, owned("ReplicaSet"))}},
		{Name: "simulator.statefulset", Reconciler: reconcile.Func(w.reconcileStatefulSet),
			Sources: []watch.Source{watch.For(&appsv1.StatefulSet{}, nil), watch.Mapped(&corev1.Pod{}, owned("StatefulSet"))}},
		{Name: "simulator.job", Reconciler: reconcile.Func(w.reconcileJob),
			Sources: []watch.Source{watch.For(&batchv1.Job{}, nil), watch.Mapped(&corev1.Pod{}, owned("Job"))}},
	}
}

type workloads struct {
	engine *Engine
	kube   client.Client
}

// podControllerIndex indexes pods by their controller's UID.
const podControllerIndex = "metadata.ownerReferences.controller.uid"

func indexPodsByController(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &corev1.Pod{}, podControllerIndex, func(o client.Object) []string {
		if ref := metav1.GetControllerOf(o); ref != nil {
			return []string{string(ref.UID)}
		}
		return nil
	})
}

// ownedPods lists the pods obj controls: the stored objects themselves,
// read, never modified (a workload controller scales the busiest
// Deployments and would copy thousands of pods on every change).
func (w *workloads) ownedPods(_ context.Context, obj client.Object) ([]*corev1.Pod, error) {
	return w.engine.store.indexedPods(podControllerIndex, string(obj.GetUID())), nil
}

func active(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// newPod stamps a pod from a template for its owner.
func newPod(owner client.Object, kind string, tmpl corev1.PodTemplateSpec, name, generateName string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: *tmpl.ObjectMeta.DeepCopy(), Spec: *tmpl.Spec.DeepCopy()}
	p.Namespace, p.Name, p.GenerateName = owner.GetNamespace(), name, generateName
	yes := true
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: owner.GetName(), UID: owner.GetUID(), Controller: &yes}}
	if kind == "Job" {
		p.OwnerReferences[0].APIVersion = "batch/v1"
	}
	if p.Spec.RestartPolicy == "" {
		p.Spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	if p.Spec.SchedulerName == "" {
		p.Spec.SchedulerName = corev1.DefaultSchedulerName
	}
	return p
}

// templateHash names a workload's pods as a ReplicaSet would.
func templateHash(name string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return strconv.FormatUint(uint64(h.Sum32()), 36)
}

// scaleTo creates or deletes pods so replicas are active; when deleting it
// takes pods not bound yet first, then the newest, as a ReplicaSet does.
func (w *workloads) scaleTo(ctx context.Context, owner client.Object, kind string, replicas int32, tmpl corev1.PodTemplateSpec) error {
	pods, err := w.ownedPods(ctx, owner)
	if err != nil {
		return err
	}
	pods = slices.DeleteFunc(pods, func(p *corev1.Pod) bool { return !active(p) })
	for i := int32(len(pods)); i < replicas; i++ {
		p := newPod(owner, kind, tmpl, "", owner.GetName()+"-"+templateHash(owner.GetName())+"-")
		if err := w.kube.Create(ctx, p); err != nil {
			return fmt.Errorf("creating a pod of %s %s/%s: %w", kind, owner.GetNamespace(), owner.GetName(), err)
		}
	}
	if extra := len(pods) - int(replicas); extra > 0 {
		slices.SortStableFunc(pods, func(a, b *corev1.Pod) int {
			if (a.Spec.NodeName == "") != (b.Spec.NodeName == "") {
				if a.Spec.NodeName == "" {
					return -1
				}
				return 1
			}
			if c := b.CreationTimestamp.Compare(a.CreationTimestamp.Time); c != 0 {
				return c
			}
			return strings.Compare(b.Name, a.Name)
		})
		for _, p := range pods[:extra] {
			if err := w.kube.Delete(ctx, p); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting pod %s/%s: %w", p.Namespace, p.Name, err)
			}
		}
	}
	return nil
}

func replicasOf(n *int32) int32 {
	if n == nil {
		return 1
	}
	return *n
}

func (w *workloads) reconcileDeployment(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	d := &appsv1.Deployment{}
	if err := w.kube.Get(ctx, req.NamespacedName, d); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	return reconcile.Result{}, w.scaleTo(ctx, d, "Deployment", replicasOf(d.Spec.Replicas), d.Spec.Template)
}

func (w *workloads) reconcileReplicaSet(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	rs := &appsv1.ReplicaSet{}
	if err := w.kube.Get(ctx, req.NamespacedName, rs); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	return reconcile.Result{}, w.scaleTo(ctx, rs, "ReplicaSet", replicasOf(rs.Spec.Replicas), rs.Spec.Template)
}

// reconcileStatefulSet keeps pods name-0 … name-(replicas-1), all at once.
func (w *workloads) reconcileStatefulSet(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ss := &appsv1.StatefulSet{}
	if err := w.kube.Get(ctx, req.NamespacedName, ss); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	pods, err := w.ownedPods(ctx, ss)
	if err != nil {
		return reconcile.Result{}, err
	}
	have := map[string]*corev1.Pod{}
	for _, p := range pods {
		have[p.Name] = p
	}
	replicas := replicasOf(ss.Spec.Replicas)
	for i := range replicas {
		name := fmt.Sprintf("%s-%d", ss.Name, i)
		if have[name] != nil {
			continue
		}
		p := newPod(ss, "StatefulSet", ss.Spec.Template, name, "")
		p.Spec.Hostname = name
		if err := w.kube.Create(ctx, p); client.IgnoreAlreadyExists(err) != nil {
			return reconcile.Result{}, fmt.Errorf("creating pod %s/%s: %w", p.Namespace, name, err)
		}
	}
	for _, p := range pods {
		var ordinal int32
		if _, err := fmt.Sscanf(strings.TrimPrefix(p.Name, ss.Name+"-"), "%d", &ordinal); err == nil && ordinal >= replicas && p.DeletionTimestamp == nil {
			if err := w.kube.Delete(ctx, p); client.IgnoreNotFound(err) != nil {
				return reconcile.Result{}, fmt.Errorf("deleting pod %s/%s: %w", p.Namespace, p.Name, err)
			}
		}
	}
	return reconcile.Result{}, nil
}

// JobDuration is how long a Job's pods run.
func JobDuration(j *batchv1.Job) (time.Duration, error) {
	v := j.Annotations[AnnotationJobDuration]
	if v == "" {
		v = j.Spec.Template.Annotations[AnnotationJobDuration]
	}
	if v == "" {
		return DefaultJobDuration, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("job %s/%s: annotation %s: %q is not a positive duration", j.Namespace, j.Name, AnnotationJobDuration, v)
	}
	return d, nil
}

// reconcileJob runs parallelism pods at a time until completions succeed;
// a pod succeeds once it has run the Job's duration.
func (w *workloads) reconcileJob(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	j := &batchv1.Job{}
	if err := w.kube.Get(ctx, req.NamespacedName, j); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	duration, err := JobDuration(j)
	if err != nil {
		return reconcile.Result{}, err
	}
	pods, err := w.ownedPods(ctx, j)
	if err != nil {
		return reconcile.Result{}, err
	}
	now := w.engine.clock.Now()
	var succeeded, running int32
	var wait time.Duration
	for _, p := range pods {
		switch {
		case p.Status.Phase == corev1.PodSucceeded:
			succeeded++
		case !active(p):
		case p.Status.Phase == corev1.PodRunning && p.Status.StartTime != nil:
			left := p.Status.StartTime.Add(duration).Sub(now)
			if left > 0 {
				running++
				if wait == 0 || left < wait {
					wait = left
				}
				continue
			}
			done := p.DeepCopy()
			done.Status.Phase = corev1.PodSucceeded
			for i := range done.Status.Conditions {
				if done.Status.Conditions[i].Type == corev1.PodReady || done.Status.Conditions[i].Type == corev1.ContainersReady {
					done.Status.Conditions[i].Status = corev1.ConditionFalse
				}
			}
			if err := w.kube.Status().Update(ctx, done); err != nil && !apierrors.IsConflict(err) {
				return reconcile.Result{}, fmt.Errorf("completing pod %s/%s: %w", p.Namespace, p.Name, err)
			}
			succeeded++
		default:
			running++
		}
	}
	completions, parallelism := int32(1), int32(1)
	if j.Spec.Parallelism != nil {
		parallelism = *j.Spec.Parallelism
	}
	if j.Spec.Completions != nil {
		completions = *j.Spec.Completions
	} else if j.Spec.Parallelism != nil {
		completions = parallelism
	}
	start := min(parallelism-running, completions-succeeded-running)
	for range max(start, 0) {
		p := newPod(j, "Job", j.Spec.Template, "", j.Name+"-")
		if p.Spec.RestartPolicy == corev1.RestartPolicyAlways {
			p.Spec.RestartPolicy = corev1.RestartPolicyNever
		}
		if err := w.kube.Create(ctx, p); err != nil {
			return reconcile.Result{}, fmt.Errorf("creating a pod of job %s/%s: %w", j.Namespace, j.Name, err)
		}
	}
	if j.Status.Succeeded != succeeded {
		j.Status.Succeeded = succeeded
		if succeeded >= completions && j.Status.CompletionTime == nil {
			t := metav1.NewTime(now)
			j.Status.CompletionTime = &t
		}
		if err := w.kube.Status().Update(ctx, j); err != nil && !apierrors.IsConflict(err) {
			return reconcile.Result{}, fmt.Errorf("updating job %s/%s: %w", j.Namespace, j.Name, err)
		}
	}
	return reconcile.Result{RequeueAfter: wait}, nil
}
