package api_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The API types are imported by every client of Nodewright, including
// out-of-tree providers: they may depend on apimachinery and k8s.io/api only.
func TestAPITypesDependOnAPIMachineryAndCoreAPIOnly(t *testing.T) {
	allowed := []string{"k8s.io/apimachinery/", "k8s.io/api/", "github.com/nodewright/nodewright/api/"}
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !strings.Contains(strings.SplitN(p, "/", 2)[0], ".") {
				continue // standard library
			}
			ok := false
			for _, a := range allowed {
				ok = ok || strings.HasPrefix(p+"/", a)
			}
			if !ok {
				t.Errorf("%s imports %s; API types may import apimachinery and k8s.io/api only", path, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 10 {
		t.Fatalf("checked only %d files; is the walk rooted at api/?", checked)
	}
}
