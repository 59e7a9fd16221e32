package termination

import (
	"context"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
// and calls mutate on the fresh copy. mutate reports whether it changed
// anything; when it did not, nothing is written. obj holds the result.
func PatchLocked[T client.Object](ctx context.Context, kube client.Client, obj T, mutate func(T) bool) error {
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
		key := client.ObjectKeyFromObject(obj)
		reflect.ValueOf(obj).Elem().SetZero()
		if err := kube.Get(ctx, key, obj); err != nil {
			return err
		}
	}
}
