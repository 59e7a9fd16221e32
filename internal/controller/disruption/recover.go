package disruption

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/metrics"
)

// recoverDecisions runs once per Loop, before its first pass: the decisions
// a previous loop (a previous process) wrote on NodeClaims are found again.
// A replace decision whose replacements all exist is adopted and carried
// on, its deadline counted from when it was written; any other (a
// replacement never created or gone, or a delete decision whose delete
// never happened) is rolled back.
func (l *Loop) recoverDecisions(ctx context.Context) error {
	var list karpv1.NodeClaimList
	if err := l.kube.List(ctx, &list); err != nil {
		return fmt.Errorf("listing nodeclaims to recover disruption decisions: %w", err)
	}
	groups := map[string]*launching{}
	var keys []string
	for i := range list.Items {
		nc := &list.Items[i]
		cond := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeDisruptionReason)
		if nc.DeletionTimestamp != nil || cond == nil || cond.Status != metav1.ConditionTrue {
			continue
		}
		key := nc.Annotations[ReplacementsAnnotation]
		if key == "" {
			key = "delete/" + nc.Name // a delete decision: each on its own
		}
		run, ok := groups[key]
		if !ok {
			run = &launching{reason: karpv1.DisruptionReason(cond.Reason), created: map[string]bool{},
				deadline: cond.LastTransitionTime.Add(l.opts.ReplacementTimeout)}
			run.replacements, run.malformed = parseReplacements(nc.Annotations[ReplacementsAnnotation])
			groups[key] = run
			keys = append(keys, key)
		}
		run.candidates = append(run.candidates, nc.Name)
		if d := cond.LastTransitionTime.Add(l.opts.ReplacementTimeout); d.Before(run.deadline) {
			run.deadline = d
		}
	}
	slices.Sort(keys)
	marked := map[string]bool{}
	for _, run := range groups {
		for _, c := range run.candidates {
			marked[c] = true
		}
	}
	var errs []error
	for _, key := range keys {
		run := groups[key]
		if l.deciding(run.candidates[0]) {
			continue // adopted by an earlier attempt whose other steps failed
		}
		run.consolidationType = recoveredType(run)
		if named := slices.DeleteFunc(slices.Clone(run.replacements), func(n string) bool { return marked[n] }); len(named) < len(run.replacements) {
			run.replacements, run.malformed = named, errors.Join(run.malformed, errors.New("it names a NodeClaim that is itself a disruption candidate"))
		}
		if run.malformed != nil {
			l.log.Error(run.malformed, "a persisted disruption decision is malformed: rolling it back, deleting only the replacements it stamped",
				"nodeclaims", run.candidates, "annotation", ReplacementsAnnotation, "value", key)
		}
		if l.launching == nil && len(run.replacements) > 0 && run.malformed == nil {
			complete, err := l.allOurs(ctx, run)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if complete {
				for _, n := range run.replacements {
					run.created[n] = true
				}
				l.launching = run
				l.log.Info("resuming a disruption decision", "reason", run.reason, "nodeclaims", run.candidates, "replacements", run.replacements, "deadline", run.deadline)
				continue
			}
		}
		errs = append(errs, l.rollback(ctx, run, "the decision was interrupted by a restart"))
	}
	return errors.Join(errs...)
}

// allOurs reports whether every replacement the recovered decision names
// exists, is not being deleted, and was created by this decision (carries
// ReplacingAnnotation naming its candidates); it reads uncached.
func (l *Loop) allOurs(ctx context.Context, run *launching) (bool, error) {
	for _, name := range run.replacements {
		nc, err := l.readReplacement(ctx, name, true)
		switch {
		case err != nil:
			return false, err
		case nc == nil || nc.DeletionTimestamp != nil:
			return false, nil
		case !replaces(nc, run.candidates):
			l.log.Error(nil, "a persisted disruption decision names a NodeClaim it did not create: rolling it back without deleting it",
				"nodeclaims", run.candidates, "NodeClaim", name, "annotation", ReplacingAnnotation, "value", nc.Annotations[ReplacingAnnotation])
			return false, nil
		}
	}
	return true, nil
}

// recoveredType labels a recovered decision's metrics.
func recoveredType(run *launching) string {
	switch {
	case run.reason == karpv1.DisruptionReasonEmpty:
		return metrics.ConsolidationTypeEmpty
	case run.reason == karpv1.DisruptionReasonDrifted:
		return ""
	case len(run.candidates) > 1:
		return metrics.ConsolidationTypeMulti
	}
	return metrics.ConsolidationTypeSingle
}
