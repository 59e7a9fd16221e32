package nodepool

import (
	"fmt"
	"strconv"

	"github.com/mitchellh/hashstructure/v2"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

// HashVersion versions the hash below: bump it when the hashed fields or
// their defaults change, so existing NodeClaims are re-stamped instead of
// all drifting at once.
const HashVersion = "v3"

// Hash fingerprints a NodePool's template for static drift: fields tagged
// hash:"ignore" (requirements, resources, budgets) do not count, list order
// does not matter, and an empty value counts as absent.
func Hash(np *karpv1.NodePool) (string, error) {
	h, err := hashstructure.Hash(np.Spec.Template, hashstructure.FormatV2, &hashstructure.HashOptions{
		SlicesAsSets: true, IgnoreZeroValue: true, ZeroNil: true,
	})
	if err != nil {
		return "", fmt.Errorf("hashing the template of nodepool %s: %w", np.Name, err)
	}
	return strconv.FormatUint(h, 10), nil
}

// Stamped returns the annotations with the hash and its version set, and
// whether that changed anything.
func Stamped(annotations map[string]string, hash string) (map[string]string, bool) {
	if annotations[karpv1.AnnotationNodePoolHash] == hash && annotations[karpv1.AnnotationNodePoolHashVersion] == HashVersion {
		return annotations, false
	}
	out := make(map[string]string, len(annotations)+2)
	for k, v := range annotations {
		out[k] = v
	}
	out[karpv1.AnnotationNodePoolHash] = hash
	out[karpv1.AnnotationNodePoolHashVersion] = HashVersion
	return out, true
}
