package simulator

import (
	"context"
	"fmt"
	"math/rand"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// store is the in-memory API server the controllers talk to: a
// controller-runtime fake client made to behave like kube-apiserver on the
// virtual clock (creation and deletion timestamps from it, names from
// generateName and UIDs drawn from the seeded generator), which reports
// every change so the engine can play informers.
type store struct {
	client.Client
	clock *clocktesting.FakeClock
	rand  *rand.Rand
	uids  int
	// deletedAt: the virtual time each object was asked to be deleted (the
	// fake client stamps the wall clock).
	deletedAt map[objectKey]metav1.Time
	// changed is told about every object created, updated or deleted.
	changed func(obj client.Object, deleted bool)
}

type objectKey struct {
	kind string
	key  types.NamespacedName
}

func keyOf(obj client.Object) objectKey {
	return objectKey{kind: reflect.TypeOf(obj).Elem().Name(), key: client.ObjectKeyFromObject(obj)}
}

const nameChars = "bcdfghjklmnpqrstvwxz2456789"

func (s *store) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if obj.GetName() == "" && obj.GetGenerateName() != "" {
		suffix := make([]byte, 5)
		for i := range suffix {
			suffix[i] = nameChars[s.rand.Intn(len(nameChars))]
		}
		obj.SetName(obj.GetGenerateName() + string(suffix))
	}
	s.uids++
	obj.SetUID(types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", s.uids)))
	obj.SetCreationTimestamp(metav1.NewTime(s.clock.Now()))
	if err := s.Client.Create(ctx, obj, opts...); err != nil {
		return err
	}
	s.report(ctx, obj)
	return nil
}

func (s *store) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if err := s.Client.Update(ctx, obj, opts...); err != nil {
		return err
	}
	s.report(ctx, obj)
	return nil
}

func (s *store) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if err := s.Client.Patch(ctx, obj, patch, opts...); err != nil {
		return err
	}
	s.report(ctx, obj)
	return nil
}

func (s *store) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if err := s.Client.Delete(ctx, obj, opts...); err != nil {
		return err
	}
	if _, ok := s.deletedAt[keyOf(obj)]; !ok {
		s.deletedAt[keyOf(obj)] = metav1.NewTime(s.clock.Now())
	}
	s.report(ctx, obj)
	return nil
}

func (s *store) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := s.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	s.fixDeletion(obj)
	return nil
}

func (s *store) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := s.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	return meta.EachListItem(list, func(o runtime.Object) error {
		if obj, ok := o.(client.Object); ok {
			s.fixDeletion(obj)
		}
		return nil
	})
}

func (s *store) Status() client.SubResourceWriter { return s.SubResource("status") }

func (s *store) SubResource(name string) client.SubResourceClient {
	return &subResource{SubResourceClient: s.Client.SubResource(name), store: s}
}

// fixDeletion replaces the fake client's wall-clock deletion timestamp
// with the virtual one.
func (s *store) fixDeletion(obj client.Object) {
	if obj.GetDeletionTimestamp() == nil {
		return
	}
	if at, ok := s.deletedAt[keyOf(obj)]; ok {
		obj.SetDeletionTimestamp(&at)
	}
}

// report tells the engine how obj stands now: updated, or deleted when it
// is gone.
func (s *store) report(ctx context.Context, obj client.Object) {
	if s.changed == nil {
		return
	}
	fresh := obj.DeepCopyObject().(client.Object)
	err := s.Get(ctx, client.ObjectKeyFromObject(obj), fresh)
	switch {
	case apierrors.IsNotFound(err):
		delete(s.deletedAt, keyOf(obj))
		s.changed(obj.DeepCopyObject().(client.Object), true)
	case err == nil:
		s.changed(fresh, false)
	}
}

// subResource reports the changes made through status and eviction.
type subResource struct {
	client.SubResourceClient
	store *store
}

func (r *subResource) Create(ctx context.Context, obj client.Object, sub client.Object, opts ...client.SubResourceCreateOption) error {
	if err := r.SubResourceClient.Create(ctx, obj, sub, opts...); err != nil {
		return err
	}
	r.store.report(ctx, obj)
	return nil
}

func (r *subResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if err := r.SubResourceClient.Update(ctx, obj, opts...); err != nil {
		return err
	}
	r.store.report(ctx, obj)
	return nil
}

func (r *subResource) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if err := r.SubResourceClient.Patch(ctx, obj, patch, opts...); err != nil {
		return err
	}
	r.store.report(ctx, obj)
	return nil
}
