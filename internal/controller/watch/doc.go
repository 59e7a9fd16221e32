// Package watch declares what wakes a reconciler: its primary kind, the
// other kinds mapped onto its requests, and predicates. A controller
// declares it once; controller-runtime serves the declaration against a
// live API server (SetupWithManager) and the simulator serves the same
// declaration against its in-memory cluster (Requests), so both wake the
// same reconcilers for the same changes.
package watch
