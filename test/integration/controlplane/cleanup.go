package controlplane

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Cleanup removes every object of the listed kinds, finalizers and all, so
// the next test starts from an empty cluster. Stop the controllers first:
// they would put the finalizers back.
func Cleanup(t testing.TB, kube client.Client, lists ...client.ObjectList) {
	t.Helper()
	ctx := context.Background()
	for _, list := range lists {
		if err := kube.List(ctx, list); err != nil {
			t.Errorf("cleanup: %v", err)
			continue
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			t.Errorf("cleanup: %v", err)
			continue
		}
		for _, item := range items {
			obj := item.(client.Object)
			if len(obj.GetFinalizers()) > 0 {
				patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
				obj.SetFinalizers(nil)
				if err := kube.Patch(ctx, obj, patch); client.IgnoreNotFound(err) != nil {
					t.Errorf("cleanup: %v", err)
				}
			}
			if err := kube.Delete(ctx, obj, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	}
}
