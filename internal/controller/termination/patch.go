package termination

import (
	"context"
	"fmt"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// conflictRetries is how many times PatchLocked reads an object again and
// retries after a conflict before it gives up (the caller's next reconcile
// then tries again).
const conflictRetries = 4

// PatchLocked changes obj in the API with mutate, as a merge patch that
// holds only if obj is still at the resourceVersion it was read at: a list
// (taints, finalizers) sent whole by a merge patch then never overwrites a
// change another actor made in between. On a conflict it reads obj again
// through kube and calls mutate on the fresh copy. mutate reports whether
// it changed anything; when it did not, nothing is written. obj holds the
// result. See PatchLockedReading for the re-read.
func PatchLocked[T client.Object](ctx context.Context, kube client.Client, obj T, mutate func(T) bool) error {
	return PatchLockedReading(ctx, kube, nil, obj, mutate)
}

// PatchLockedReading is PatchLocked reading obj again, after a conflict,
// through reader: the manager's APIReader, which asks the API server,
// whereas a cached client usually answers the very copy that conflicted
// (nil reads through kube). An object that was deleted and created again
// under the same name (another UID) is not the one the caller decided
// about: it is left alone and the error is NotFound.
func PatchLockedReading[T client.Object](ctx context.Context, kube client.Client, reader client.Reader, obj T, mutate func(T) bool) error {
	if reader == nil {
		reader = kube
	}
	uid := obj.GetUID()
	for attempt := 0; ; attempt++ {
		before := obj.DeepCopyObject().(T)
		if !mutate(obj) {
			return nil
		}
		err := kube.Patch(ctx, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
		if !apierrors.IsConflict(err) || attempt == conflictRetries {
			return err
		}
		// A read decodes into what is there: start from an empty object so
		// no stale field survives.
		key := client.ObjectKeyFromObject(before)
		fresh := before.DeepCopyObject().(T)
		reflect.ValueOf(fresh).Elem().SetZero()
		if err := reader.Get(ctx, key, fresh); err != nil {
			return err
		}
		if uid != "" && fresh.GetUID() != uid {
			gvk, _ := kube.GroupVersionKindFor(before)
			return fmt.Errorf("%s %s was deleted and created again (uid %s, now %s): %w", gvk.Kind, key.Name, uid, fresh.GetUID(),
				apierrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, key.Name))
		}
		reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(fresh).Elem())
	}
}
