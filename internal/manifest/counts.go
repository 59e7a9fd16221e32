package manifest

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
)

// checkCounts rejects a workload whose replica counts are negative, as the
// API server does: they say how many pods it expands to.
func checkCounts(obj any) error {
	type count struct {
		field string
		n     *int32
	}
	var counts []count
	switch o := obj.(type) {
	case *appsv1.Deployment:
		counts = []count{{"spec.replicas", o.Spec.Replicas}}
	case *appsv1.ReplicaSet:
		counts = []count{{"spec.replicas", o.Spec.Replicas}}
	case *appsv1.StatefulSet:
		counts = []count{{"spec.replicas", o.Spec.Replicas}}
	case *batchv1.Job:
		counts = []count{{"spec.parallelism", o.Spec.Parallelism}, {"spec.completions", o.Spec.Completions}}
	}
	for _, c := range counts {
		if c.n != nil && *c.n < 0 {
			return fmt.Errorf("%s: %d: must not be negative", c.field, *c.n)
		}
	}
	return nil
}
