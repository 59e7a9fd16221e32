package fieldpatch

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Retries is how many times a conflicting write is computed again on a
// fresh copy before the conflict is handed back.
const Retries = 3

// ConflictRequeue is how soon a reconcile that ended on a conflict should
// run again. The watch event of the newer version usually wakes it first.
const ConflictRequeue = 500 * time.Millisecond

// IsConflict reports whether err is a write conflict: the reconcile should
// requeue (after ConflictRequeue) without reporting an error.
func IsConflict(err error) bool { return apierrors.IsConflict(err) }

// Status patches obj's status subresource with the change mutate makes to
// it; see Object.
func Status[T client.Object](ctx context.Context, kube client.Client, reader client.Reader, obj T, mutate func(T)) (bool, error) {
	return write(ctx, kube, reader, obj, mutate, func(obj client.Object, p client.Patch) error {
		return kube.Status().Patch(ctx, obj, p)
	})
}

// Object patches obj (its metadata and spec) with the change mutate makes
// to it. mutate is called on obj, and again on a fresh copy after each
// conflict: it must apply the caller's intent, not a diff it computed
// earlier. The answer says whether anything was written; obj holds the
// object as written (or as last read). reader re-reads after a conflict:
// the manager's APIReader, or nil to read through kube (then a copy that
// has not moved since the conflict ends the attempts). An object that was
// deleted and created again under the same name is not the one the caller
// decided about: it is left alone and the error is NotFound.
func Object[T client.Object](ctx context.Context, kube client.Client, reader client.Reader, obj T, mutate func(T)) (bool, error) {
	return write(ctx, kube, reader, obj, mutate, func(obj client.Object, p client.Patch) error {
		return kube.Patch(ctx, obj, p)
	})
}

func write[T client.Object](ctx context.Context, kube client.Client, reader client.Reader, obj T, mutate func(T), patch func(client.Object, client.Patch) error) (bool, error) {
	cached := reader == nil
	if cached {
		reader = kube
	}
	uid := obj.GetUID()
	for attempt := 0; ; attempt++ {
		before := obj.DeepCopyObject().(T)
		mutate(obj)
		data, err := client.MergeFrom(before).Data(obj)
		if err != nil {
			return false, fmt.Errorf("computing the patch of %s: %w", obj.GetName(), err)
		}
		if string(data) == "{}" {
			return false, nil
		}
		p := client.MergeFrom(before)
		if carriesList(data) {
			p = client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})
		}
		err = patch(obj, p)
		if err == nil {
			return true, nil
		}
		if !apierrors.IsConflict(err) || attempt == Retries {
			return false, err
		}
		fresh, rerr := reread(ctx, reader, before)
		if rerr != nil {
			return false, rerr
		}
		if uid != "" && fresh.GetUID() != uid {
			gvk, _ := kube.GroupVersionKindFor(before)
			return false, fmt.Errorf("%s %s was deleted and created again (uid %s, now %s): %w", gvk.Kind, before.GetName(), uid, fresh.GetUID(),
				apierrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, before.GetName()))
		}
		reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(fresh).Elem())
		if cached && fresh.GetResourceVersion() == before.GetResourceVersion() {
			// The cache still holds the version that conflicted: another
			// write from it would conflict the same way.
			return false, err
		}
	}
}

// reread reads like's object again into an empty copy, so that no stale
// field survives.
func reread[T client.Object](ctx context.Context, reader client.Reader, like T) (T, error) {
	fresh := like.DeepCopyObject().(T)
	reflect.ValueOf(fresh).Elem().SetZero()
	if err := reader.Get(ctx, client.ObjectKeyFromObject(like), fresh); err != nil {
		return fresh, fmt.Errorf("reading %s again after a conflict: %w", like.GetName(), err)
	}
	return fresh, nil
}

// carriesList reports whether a merge patch sets a list anywhere: the
// server replaces it whole.
func carriesList(data []byte) bool {
	var v any
	if json.Unmarshal(data, &v) != nil {
		return true // unreadable: be safe
	}
	return hasList(v)
}

func hasList(v any) bool {
	switch t := v.(type) {
	case []any:
		return true
	case map[string]any:
		for _, x := range t {
			if hasList(x) {
				return true
			}
		}
	}
	return false
}
