// Package fieldpatch writes the fields a controller owns, and only those,
// as JSON merge patches: of an object's status subresource (Status) or of
// the object itself (Object).
//
// A merge patch replaces a list whole (conditions, taints, finalizers,
// owner references), so a patch that carries one is sent with the
// resourceVersion it was computed from: it holds only if nobody wrote the
// object since, and can never drop an entry another actor added in
// between. A patch of scalars and maps only (labels, annotations,
// providerID, capacity) merges key by key and goes without a lock: it
// cannot conflict and cannot undo anyone else's keys. On a conflict the
// object is read again and the caller's change is applied to the fresh
// copy, a few times at most; when the reader answers the very version that
// conflicted (an informer cache that has not caught up), writing again
// would only conflict again, so the conflict is handed back for the
// caller to requeue (see IsConflict and ConflictRequeue) rather than
// logged as an error. Nothing is written when the change leaves the object
// as it is.
//
// OwnedConditions applies one controller's condition changes to a fresh
// copy without touching conditions other controllers own.
package fieldpatch
