//go:build integration

package api_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The seed documents' manifests, copied unchanged into testdata, must apply
// with kubectl (strict field validation) and be stored exactly as written.
func TestSeedManifestsApplyUnchanged(t *testing.T) {
	ctx := context.Background()
	files, err := filepath.Glob("../../../testdata/seed/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no seed manifests found: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			want := parse(t, string(raw))
			if out, err := kubectl(ctx, t, "", "apply", "-f", file); err != nil {
				t.Fatalf("kubectl apply rejected the seed manifest: %v", err)
			} else if !strings.Contains(out, "created") && !strings.Contains(out, "configured") && !strings.Contains(out, "unchanged") {
				t.Fatalf("unexpected kubectl output: %s", out)
			}
			args := []string{"get", "-o", "json", "-f", file}
			out, err := kubectl(ctx, t, "", args...)
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("kubectl get output: %v", err)
			}
			if diffs := contains("", got["spec"], want.Object["spec"]); len(diffs) > 0 {
				t.Errorf("%s was not stored as written:\n%s", file, strings.Join(diffs, "\n"))
			}
			t.Cleanup(func() { _, _ = kubectl(context.Background(), t, "", "delete", "--wait=false", "-f", file) })
		})
	}
}
