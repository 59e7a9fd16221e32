package watch

import (
	"context"
	"reflect"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Source is one kind a controller watches.
type Source struct {
	// Object is an empty object of the kind.
	Object client.Object
	// Predicate filters the objects that wake the controller; nil: all.
	Predicate func(client.Object) bool
	// Map turns an object into requests; nil: the object's own key (the
	// controller's primary kind).
	Map handler.MapFunc
}

// Controller is a named reconciler and what wakes it.
type Controller struct {
	Name       string
	Reconciler reconcile.Reconciler
	// Sources: exactly one without Map, the primary kind.
	Sources []Source
	// Workers is how many requests it reconciles at once (0: one).
	// Requests for one object are never reconciled concurrently.
	Workers int
}

// For is the primary kind's source.
func For(obj client.Object, pred func(client.Object) bool) Source {
	return Source{Object: obj, Predicate: pred}
}

// Mapped is a source that maps obj's kind onto requests.
func Mapped(obj client.Object, m handler.MapFunc) Source {
	return Source{Object: obj, Map: m}
}

// SetupWithManager registers the controller with controller-runtime.
func (c Controller) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).Named(c.Name)
	for _, s := range c.Sources {
		var preds []predicate.Predicate
		if s.Predicate != nil {
			preds = append(preds, predicate.NewPredicateFuncs(s.Predicate))
		}
		if s.Map == nil {
			b = b.For(s.Object, builder.WithPredicates(preds...))
		} else {
			b = b.Watches(s.Object, handler.EnqueueRequestsFromMapFunc(s.Map), builder.WithPredicates(preds...))
		}
	}
	if c.Workers > 1 {
		b = b.WithOptions(controller.Options{MaxConcurrentReconciles: c.Workers})
	}
	return b.Complete(c.Reconciler)
}

// Requests are the requests a change to obj (created, updated or deleted)
// makes for this controller, as controller-runtime would enqueue them.
func (c Controller) Requests(ctx context.Context, obj client.Object) []reconcile.Request {
	var out []reconcile.Request
	for _, s := range c.Sources {
		if reflect.TypeOf(s.Object) != reflect.TypeOf(obj) || (s.Predicate != nil && !s.Predicate(obj)) {
			continue
		}
		if s.Map == nil {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
			continue
		}
		out = append(out, s.Map(ctx, obj)...)
	}
	return out
}
