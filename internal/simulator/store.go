package simulator

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/nodewright/nodewright/internal/sched/resources"
)

// store is the in-memory API server the controllers talk to through the
// controller-runtime client interface. It keeps typed objects (no
// serialization on reads), stamps creation and deletion times from the
// virtual clock, names objects from generateName and UIDs from a seeded
// generator, honours finalizers, resource-version conflicts, the status
// subresource and field indexes, and reports every change so the engine can
// play informers. Lists come back sorted by namespace and name, so runs are
// deterministic.
type store struct {
	scheme  *runtime.Scheme
	mapper  meta.RESTMapper
	clock   *clocktesting.FakeClock
	rand    *rand.Rand
	uids    int
	version int64
	objects map[schema.GroupVersionKind]map[types.NamespacedName]client.Object
	indexes map[schema.GroupVersionKind]map[string]client.IndexerFunc
	// indexed: per kind and field, the keys of the objects with each value.
	indexed map[schema.GroupVersionKind]map[string]map[string]map[types.NamespacedName]struct{}
	// changed is told about every object created, updated or deleted.
	changed func(obj client.Object, deleted bool)
	// evictionAllowed decides evictions (PodDisruptionBudgets); nil: all.
	evictionAllowed func(ctx context.Context, pod client.Object) error
	// defaults are the CRDs' defaults, applied on create and update.
	defaults crdDefaults
}

var _ client.Client = (*store)(nil)

func newStore(scheme *runtime.Scheme, mapper meta.RESTMapper, clk *clocktesting.FakeClock, seed int64) *store {
	return &store{scheme: scheme, mapper: mapper, clock: clk, rand: rand.New(rand.NewSource(seed)),
		objects: map[schema.GroupVersionKind]map[types.NamespacedName]client.Object{},
		indexes: map[schema.GroupVersionKind]map[string]client.IndexerFunc{},
		indexed: map[schema.GroupVersionKind]map[string]map[string]map[types.NamespacedName]struct{}{}}
}

// IndexField registers a field index, as a cache does.
func (s *store) IndexField(_ context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	gvk, err := s.GroupVersionKindFor(obj)
	if err != nil {
		return err
	}
	if s.indexes[gvk] == nil {
		s.indexes[gvk] = map[string]client.IndexerFunc{}
	}
	s.indexes[gvk][field] = extract
	if s.indexed[gvk] == nil {
		s.indexed[gvk] = map[string]map[string]map[types.NamespacedName]struct{}{}
	}
	s.indexed[gvk][field] = map[string]map[types.NamespacedName]struct{}{}
	for key, obj := range s.objects[gvk] {
		s.index(gvk, key, nil, obj)
	}
	return nil
}

// index moves key from old's index values to obj's (either may be nil).
func (s *store) index(gvk schema.GroupVersionKind, key types.NamespacedName, old, obj client.Object) {
	for field, extract := range s.indexes[gvk] {
		values := s.indexed[gvk][field]
		if old != nil {
			for _, v := range extract(old) {
				delete(values[v], key)
			}
		}
		if obj != nil {
			for _, v := range extract(obj) {
				if values[v] == nil {
					values[v] = map[types.NamespacedName]struct{}{}
				}
				values[v][key] = struct{}{}
			}
		}
	}
}

// indexedPods returns the stored pods whose field index holds value,
// sorted, without copying them: for the simulator's own controllers, which
// only read them.
func (s *store) indexedPods(field, value string) []*corev1.Pod {
	gvk := corev1.SchemeGroupVersion.WithKind("Pod")
	keys := make([]types.NamespacedName, 0, len(s.indexed[gvk][field][value]))
	for k := range s.indexed[gvk][field][value] {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b types.NamespacedName) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	out := make([]*corev1.Pod, len(keys))
	for i, k := range keys {
		out[i] = s.objects[gvk][k].(*corev1.Pod)
	}
	return out
}

// put stores obj under key, keeping the indexes; remove takes it out.
func (s *store) put(gvk schema.GroupVersionKind, objs map[types.NamespacedName]client.Object, key types.NamespacedName, obj client.Object) {
	s.index(gvk, key, objs[key], obj)
	objs[key] = obj
}

func (s *store) remove(gvk schema.GroupVersionKind, objs map[types.NamespacedName]client.Object, key types.NamespacedName) {
	s.index(gvk, key, objs[key], nil)
	delete(objs, key)
}

func (s *store) Scheme() *runtime.Scheme     { return s.scheme }
func (s *store) RESTMapper() meta.RESTMapper { return s.mapper }
func (s *store) GroupVersionKindFor(obj runtime.Object) (schema.GroupVersionKind, error) {
	return apiutil.GVKForObject(obj, s.scheme)
}
func (s *store) IsObjectNamespaced(obj runtime.Object) (bool, error) {
	return apiutil.IsObjectNamespaced(obj, s.scheme, s.mapper)
}

func (s *store) resource(gvk schema.GroupVersionKind) schema.GroupResource {
	if m, err := s.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
		return m.Resource.GroupResource()
	}
	return schema.GroupResource{Group: gvk.Group, Resource: strings.ToLower(gvk.Kind) + "s"}
}

func (s *store) kind(obj client.Object) (schema.GroupVersionKind, map[types.NamespacedName]client.Object, error) {
	gvk, err := s.GroupVersionKindFor(obj)
	if err != nil {
		return gvk, nil, err
	}
	if s.objects[gvk] == nil {
		s.objects[gvk] = map[types.NamespacedName]client.Object{}
	}
	return gvk, s.objects[gvk], nil
}

// lookup finds the stored object obj names: its kind, the kind's objects,
// its key, and the object, or NotFound.
func (s *store) lookup(obj client.Object) (schema.GroupVersionKind, map[types.NamespacedName]client.Object, types.NamespacedName, client.Object, error) {
	gvk, objs, err := s.kind(obj)
	if err != nil {
		return gvk, nil, types.NamespacedName{}, nil, err
	}
	key := client.ObjectKeyFromObject(obj)
	stored, ok := objs[key]
	if !ok {
		return gvk, objs, key, nil, apierrors.NewNotFound(s.resource(gvk), key.Name)
	}
	return gvk, objs, key, stored, nil
}

// into copies stored into out (typed, or unstructured).
func into(stored, out client.Object) {
	if u, ok := out.(*unstructured.Unstructured); ok {
		gvk := u.GroupVersionKind()
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(stored)
		if err == nil {
			u.SetUnstructuredContent(m)
			u.SetGroupVersionKind(gvk)
		}
		return
	}
	reflect.ValueOf(out).Elem().Set(reflect.ValueOf(stored.DeepCopyObject()).Elem())
}

func (s *store) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	obj.SetNamespace(key.Namespace)
	obj.SetName(key.Name)
	_, _, _, stored, err := s.lookup(obj)
	if err != nil {
		return err
	}
	into(stored, obj)
	return nil
}

func (s *store) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	listGVK, err := s.GroupVersionKindFor(list)
	if err != nil {
		return err
	}
	gvk := listGVK.GroupVersion().WithKind(strings.TrimSuffix(listGVK.Kind, "List"))
	o := (&client.ListOptions{}).ApplyOptions(opts)
	var fieldReqs [][2]string
	if o.FieldSelector != nil {
		for _, r := range o.FieldSelector.Requirements() {
			if s.indexes[gvk][r.Field] == nil {
				return fmt.Errorf("listing %s: no index for field %s", gvk.Kind, r.Field)
			}
			fieldReqs = append(fieldReqs, [2]string{r.Field, r.Value})
		}
	}
	objs := s.objects[gvk]
	var scan map[types.NamespacedName]client.Object = objs
	if len(fieldReqs) > 0 {
		// The first field's index gives the candidates.
		scan = map[types.NamespacedName]client.Object{}
		for k := range s.indexed[gvk][fieldReqs[0][0]][fieldReqs[0][1]] {
			scan[k] = objs[k]
		}
	}
	keys := make([]types.NamespacedName, 0, len(scan))
	for k, obj := range scan {
		if o.Namespace != "" && k.Namespace != o.Namespace {
			continue
		}
		if o.LabelSelector != nil && !o.LabelSelector.Matches(labels.Set(obj.GetLabels())) {
			continue
		}
		if !slices.ContainsFunc(fieldReqs, func(r [2]string) bool { return !slices.Contains(s.indexes[gvk][r[0]](obj), r[1]) }) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b types.NamespacedName) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	// As controller-runtime's cache: UnsafeDisableDeepCopy hands out the
	// stored objects themselves, for readers that promise not to modify.
	share := o.UnsafeDisableDeepCopy != nil && *o.UnsafeDisableDeepCopy
	items := make([]runtime.Object, len(keys))
	for i, k := range keys {
		if share {
			items[i] = objs[k]
		} else {
			items[i] = objs[k].DeepCopyObject()
		}
	}
	return meta.SetList(list, items)
}

const nameChars = "bcdfghjklmnpqrstvwxz2456789"

func (s *store) Create(_ context.Context, obj client.Object, _ ...client.CreateOption) error {
	gvk, objs, err := s.kind(obj)
	if err != nil {
		return err
	}
	if obj.GetName() == "" && obj.GetGenerateName() != "" {
		for {
			suffix := make([]byte, 5)
			for i := range suffix {
				suffix[i] = nameChars[s.rand.Intn(len(nameChars))]
			}
			obj.SetName(obj.GetGenerateName() + string(suffix))
			if _, taken := objs[client.ObjectKeyFromObject(obj)]; !taken {
				break
			}
		}
	}
	if obj.GetName() == "" {
		return apierrors.NewBadRequest(fmt.Sprintf("%s: metadata.name or metadata.generateName is required", gvk.Kind))
	}
	key := client.ObjectKeyFromObject(obj)
	if _, exists := objs[key]; exists {
		return apierrors.NewAlreadyExists(s.resource(gvk), key.Name)
	}
	if err := s.defaults.apply(gvk, obj); err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("%s %s: %v", gvk.Kind, key, err))
	}
	s.uids++
	s.version++
	obj.SetUID(types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", s.uids)))
	obj.SetCreationTimestamp(metav1.NewTime(s.clock.Now()))
	obj.SetResourceVersion(fmt.Sprint(s.version))
	obj.SetGeneration(1)
	obj.SetDeletionTimestamp(nil)
	if pod, ok := obj.(*corev1.Pod); ok {
		if pod.Status.Phase == "" {
			pod.Status.Phase = corev1.PodPending // as the API server defaults it
		}
		resources.DefaultRequests(pod) // limits without requests, as the API server defaults them
	}
	s.put(gvk, objs, key, obj.DeepCopyObject().(client.Object))
	s.report(objs[key], false)
	return nil
}

func (s *store) Update(_ context.Context, obj client.Object, _ ...client.UpdateOption) error {
	return s.write(obj, "")
}

func (s *store) Patch(_ context.Context, obj client.Object, patch client.Patch, _ ...client.PatchOption) error {
	patched, err := s.patched(obj, patch)
	if err != nil {
		return err
	}
	if err := s.write(patched, ""); err != nil {
		return err
	}
	into(patched, obj)
	return nil
}

// patched applies patch to the stored object.
func (s *store) patched(obj client.Object, patch client.Patch) (client.Object, error) {
	gvk, _, _, stored, err := s.lookup(obj)
	if err != nil {
		return nil, err
	}
	data, err := patch.Data(obj)
	if err != nil {
		return nil, err
	}
	original, err := json.Marshal(stored)
	if err != nil {
		return nil, err
	}
	var merged []byte
	switch patch.Type() {
	case types.MergePatchType:
		merged, err = jsonpatch.MergePatch(original, data)
	case types.StrategicMergePatchType:
		merged, err = strategicpatch.StrategicMergePatch(original, data, stored)
	case types.JSONPatchType:
		var p jsonpatch.Patch
		if p, err = jsonpatch.DecodePatch(data); err == nil {
			merged, err = p.Apply(original)
		}
	default:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("patch type %s is not supported here", patch.Type()))
	}
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("patching %s %s: %v", gvk.Kind, obj.GetName(), err))
	}
	out := stored.DeepCopyObject().(client.Object)
	reflect.ValueOf(out).Elem().Set(reflect.Zero(reflect.TypeOf(out).Elem()))
	if err := json.Unmarshal(merged, out); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("patching %s %s: %v", gvk.Kind, obj.GetName(), err))
	}
	return out, nil
}

// write stores obj over the stored object: the whole object but its status
// (subresource ""), or only its status ("status"). A resource version that
// is set must match. Removing the last finalizer of a deleted object
// removes it.
func (s *store) write(obj client.Object, subresource string) error {
	gvk, objs, key, stored, err := s.lookup(obj)
	if err != nil {
		return err
	}
	if rv := obj.GetResourceVersion(); rv != "" && rv != stored.GetResourceVersion() {
		return apierrors.NewConflict(s.resource(gvk), key.Name, errors.New("the object has been modified; please apply your changes to the latest version and try again"))
	}
	next := obj.DeepCopyObject().(client.Object)
	if subresource == "" {
		if err := s.defaults.apply(gvk, next); err != nil {
			return apierrors.NewBadRequest(fmt.Sprintf("%s %s: %v", gvk.Kind, key, err))
		}
	}
	if subresource == "status" {
		next = stored.DeepCopyObject().(client.Object)
		copyField(next, obj, "Status")
	} else {
		copyField(next, stored, "Status")
		next.SetUID(stored.GetUID())
		next.SetCreationTimestamp(stored.GetCreationTimestamp())
		next.SetDeletionTimestamp(stored.GetDeletionTimestamp())
		next.SetGeneration(stored.GetGeneration())
		if !equality.Semantic.DeepEqual(field(next, "Spec"), field(stored, "Spec")) {
			next.SetGeneration(stored.GetGeneration() + 1)
		}
	}
	if equality.Semantic.DeepEqual(next, stored) {
		into(stored, obj)
		return nil // nothing changed: no new version, no event
	}
	s.version++
	next.SetResourceVersion(fmt.Sprint(s.version))
	if next.GetDeletionTimestamp() != nil && len(next.GetFinalizers()) == 0 {
		s.remove(gvk, objs, key)
		into(next, obj)
		s.report(next, true)
		return nil
	}
	s.put(gvk, objs, key, next)
	into(next, obj)
	s.report(next, false)
	return nil
}

// field returns a struct field of obj (e.g. Spec), or nil.
func field(obj client.Object, name string) any {
	v := reflect.ValueOf(obj).Elem().FieldByName(name)
	if !v.IsValid() {
		return nil
	}
	return v.Interface()
}

// copyField sets dst's field name to src's.
func copyField(dst, src client.Object, name string) {
	d := reflect.ValueOf(dst).Elem().FieldByName(name)
	v := reflect.ValueOf(src).Elem().FieldByName(name)
	if d.IsValid() && v.IsValid() && d.CanSet() {
		d.Set(v)
	}
}

func (s *store) Delete(_ context.Context, obj client.Object, opts ...client.DeleteOption) error {
	gvk, objs, key, stored, err := s.lookup(obj)
	if err != nil {
		return err
	}
	o := (&client.DeleteOptions{}).ApplyOptions(opts)
	if p := o.Preconditions; p != nil {
		if p.UID != nil && *p.UID != stored.GetUID() || p.ResourceVersion != nil && *p.ResourceVersion != stored.GetResourceVersion() {
			return apierrors.NewConflict(s.resource(gvk), key.Name, errors.New("precondition failed"))
		}
	}
	if len(stored.GetFinalizers()) == 0 {
		s.remove(gvk, objs, key)
		s.report(stored, true)
		return nil
	}
	if stored.GetDeletionTimestamp() != nil {
		return nil
	}
	next := stored.DeepCopyObject().(client.Object)
	now := metav1.NewTime(s.clock.Now())
	next.SetDeletionTimestamp(&now)
	s.version++
	next.SetResourceVersion(fmt.Sprint(s.version))
	s.put(gvk, objs, key, next)
	s.report(next, false)
	return nil
}

func (s *store) DeleteAllOf(context.Context, client.Object, ...client.DeleteAllOfOption) error {
	return errors.New("the simulator does not support DeleteAllOf")
}

func (s *store) Apply(context.Context, runtime.ApplyConfiguration, ...client.ApplyOption) error {
	return errors.New("the simulator does not support server-side apply")
}

func (s *store) Status() client.SubResourceWriter { return s.SubResource("status") }

func (s *store) SubResource(name string) client.SubResourceClient {
	return &subResource{store: s, name: name}
}

// report tells the engine about a change; it gets its own copy.
func (s *store) report(obj client.Object, deleted bool) {
	if s.changed != nil {
		s.changed(obj.DeepCopyObject().(client.Object), deleted)
	}
}

// subResource serves status (update and patch) and eviction (create).
type subResource struct {
	store *store
	name  string
}

func (r *subResource) Get(ctx context.Context, obj, _ client.Object, _ ...client.SubResourceGetOption) error {
	return fmt.Errorf("the simulator does not serve GET %s", r.name)
}

func (r *subResource) Create(ctx context.Context, obj, _ client.Object, _ ...client.SubResourceCreateOption) error {
	if r.name != "eviction" {
		return fmt.Errorf("the simulator does not serve CREATE %s", r.name)
	}
	if r.store.evictionAllowed != nil {
		if err := r.store.evictionAllowed(ctx, obj); err != nil {
			return err
		}
	}
	return r.store.Delete(ctx, obj)
}

func (r *subResource) Apply(context.Context, runtime.ApplyConfiguration, ...client.SubResourceApplyOption) error {
	return errors.New("the simulator does not support server-side apply")
}

func (r *subResource) Update(_ context.Context, obj client.Object, _ ...client.SubResourceUpdateOption) error {
	if r.name != "status" {
		return fmt.Errorf("the simulator does not serve UPDATE %s", r.name)
	}
	return r.store.write(obj, "status")
}

func (r *subResource) Patch(_ context.Context, obj client.Object, patch client.Patch, _ ...client.SubResourcePatchOption) error {
	if r.name != "status" {
		return fmt.Errorf("the simulator does not serve PATCH %s", r.name)
	}
	patched, err := r.store.patched(obj, patch)
	if err != nil {
		return err
	}
	if err := r.store.write(patched, "status"); err != nil {
		return err
	}
	into(patched, obj)
	return nil
}
