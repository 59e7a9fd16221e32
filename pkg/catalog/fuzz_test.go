package catalog

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// hugeExponent matches a quantity whose decimal exponent may not fit an
// int32. k8s.io/apimachinery v0.37.2 truncates such an exponent and can
// then loop for minutes in ParseQuantity ("1e110000000000"); upstream
// rejects them since kubernetes/kubernetes#141203. Remove this guard once
// go.mod's apimachinery has that fix.
// Five digits, not ten: an eight-digit exponent ("e22220002") already
// takes seconds to parse, enough to hang a fuzz worker.
var hugeExponent = regexp.MustCompile(`[eE][-+]?[0-9]{5,}`)

// FuzzParse reads arbitrary bytes as a catalog: every input is either
// instance types that honour the catalog's promises (a name, unique;
// positive CPU and memory; nothing negative; offerings with a capacity
// type, a zone and a price) or an error naming the source, never a panic.
func FuzzParse(f *testing.F) {
	// A few entries of the embedded AWS catalog: the whole is 2 MB.
	data, err := os.ReadFile("data/aws-us-east-1.catalog.json")
	if err != nil {
		f.Fatal(err)
	}
	var entries []json.RawMessage
	if err := json.Unmarshal(data, &entries); err != nil {
		f.Fatal(err)
	}
	for _, i := range []int{0, len(entries) / 2, len(entries) - 1} {
		f.Add([]byte("[" + string(entries[i]) + "]"))
	}
	for _, s := range []string{
		`[{"name":"c-4x-amd64-linux","architecture":"amd64","resources":{"cpu":"4","memory":"16Gi"},"offerings":[{"Price":0.17,"Requirements":[{"key":"karpenter.sh/capacity-type","operator":"In","values":["spot"]},{"key":"topology.kubernetes.io/zone","operator":"In","values":["test-zone-a"]}]}]}]`,
		`[{"name":"m.large","labels":{"kubernetes.io/arch":"arm64"},"resources":{"cpu":"2","memory":"8Gi","nvidia.com/gpu":"1"},"allocatable":{"cpu":"1930m","memory":"-1"},"offerings":[{"capacityType":"reserved","zone":"z","price":0,"available":false}]}]`,
		`[{"name":"a"},{"name":"a"}]`,
		`[]`,
		`{}`,
		`[{"name":"x","architecture":"amd64","resources":{"cpu":"1e19","memory":"1"}}] trailing`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if hugeExponent.Match(data) {
			return // see hugeExponent
		}
		types, err := Parse("fuzz.json", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "catalog fuzz.json: ") {
				t.Fatalf("error %q does not name the catalog", err)
			}
			return
		}
		seen := map[string]bool{}
		for _, it := range types {
			if it.Name == "" || seen[it.Name] {
				t.Fatalf("instance type name %q: empty or repeated", it.Name)
			}
			seen[it.Name] = true
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				if q := it.Capacity[r]; q.Sign() <= 0 {
					t.Fatalf("%s: capacity %s %s, want positive", it.Name, r, q.String())
				}
			}
			for what, rl := range map[string]corev1.ResourceList{"capacity": it.Capacity, "allocatable": it.Allocatable} {
				for r, q := range rl {
					if q.Sign() < 0 {
						t.Fatalf("%s: %s %s %s is negative", it.Name, what, r, q.String())
					}
				}
			}
			if it.Labels[corev1.LabelArchStable] == "" || it.Labels[corev1.LabelInstanceTypeStable] != it.Name {
				t.Fatalf("%s: labels %v lack the architecture or the name", it.Name, it.Labels)
			}
			for _, o := range it.Offerings {
				if o.CapacityType == "" || o.Zone == "" || o.Price < 0 {
					t.Fatalf("%s: offering %+v", it.Name, o)
				}
			}
			_ = it.Holds(it.Allocatable)
			_, _ = it.Cheapest(func(Offering) bool { return true })
			_, _, _ = it.Available(), it.Zones(), it.CapacityTypes()
		}
	})
}

// A negative allocatable (FuzzParse found it accepted) is an error naming
// the entry and the field.
func TestNegativeAllocatableIsAnError(t *testing.T) {
	data := `[{"name":"m.large","architecture":"arm64","resources":{"cpu":"2","memory":"8Gi"},"allocatable":{"memory":"-1"}}]`
	_, err := Parse("c.json", []byte(data))
	if want := `catalog c.json: instance type [0] "m.large": allocatable.memory: negative`; err == nil || err.Error() != want {
		t.Fatalf("Parse = %v, want %q", err, want)
	}
}
