package api_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	awsv1 "github.com/nodewright/nodewright/api/aws/v1"
	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

// Every NodePool and EC2NodeClass a user wrote for Karpenter must decode into
// the Go types with no unknown field, and encode back to the same document:
// the controllers read these types, so a field the types lack would be
// silently ignored.
func TestSeedManifestsRoundTripThroughGoTypes(t *testing.T) {
	files, err := filepath.Glob("../testdata/seed/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no seed manifests: %v", err)
	}
	decoded := 0
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(raw, &meta); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		var obj any
		switch meta.Kind {
		case "NodePool":
			obj = &karpv1.NodePool{}
		case "NodeClaim":
			obj = &karpv1.NodeClaim{}
		case "EC2NodeClass":
			obj = &awsv1.EC2NodeClass{}
		default:
			continue
		}
		t.Run(filepath.Base(file), func(t *testing.T) {
			if err := yaml.UnmarshalStrict(raw, obj); err != nil {
				t.Fatalf("the Go types do not know every field: %v", err)
			}
			back, err := json.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			var want, got map[string]any
			if err := yaml.Unmarshal(raw, &want); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(back, &got); err != nil {
				t.Fatal(err)
			}
			// Empty metadata and status are the types' zero values, not user data.
			delete(got, "status")
			delete(got["metadata"].(map[string]any), "creationTimestamp")
			if !reflect.DeepEqual(normalize(want), normalize(got)) {
				t.Errorf("round trip changed the manifest:\nwrote %v\n  got %v", want, got)
			}
		})
		decoded++
	}
	if decoded < 4 {
		t.Errorf("decoded %d Karpenter manifests, want at least 4", decoded)
	}
}

// normalize makes numbers comparable between YAML and JSON decoding, and
// writes quantities in canonical form ("1000" and "1k" are the same limit).
func normalize(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return canonical(out)
}

func canonical(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = canonical(e)
		}
	case []any:
		for i, e := range x {
			x[i] = canonical(e)
		}
	case string:
		if q, err := resource.ParseQuantity(x); err == nil {
			return q.String()
		}
	}
	return v
}
