package metrics

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Every request the controllers' client makes to the API server is counted
// in controller-runtime's registry, the one the controller serves on
// /metrics, as rest_client_requests_total by method and status code: a
// conflict shows as code 409.
func TestAPIRequestsCountedByMethodAndCode(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.Method {
		case http.MethodGet:
			node := corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}, ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "1"}}
			_ = json.NewEncoder(w).Encode(node)
		default:
			status := apierrors.NewConflict(corev1.Resource("nodes"), "n1", nil).ErrStatus
			status.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}
			w.WriteHeader(http.StatusConflict)
			_ = json.NewEncoder(w).Encode(status)
		}
	}))
	defer api.Close()
	host, err := url.Parse(api.URL)
	if err != nil {
		t.Fatal(err)
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("Node"), meta.RESTScopeRoot)
	kube, err := client.New(&rest.Config{Host: api.URL}, client.Options{Scheme: clientgoscheme.Scheme, Mapper: mapper})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	node := &corev1.Node{}
	if err := kube.Get(ctx, client.ObjectKey{Name: "n1"}, node); err != nil {
		t.Fatal(err)
	}
	if err := kube.Patch(ctx, node, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"resourceVersion":"0"}}`))); !apierrors.IsConflict(err) {
		t.Fatalf("patch: %v, want a conflict", err)
	}
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "rest_client_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["host"] == host.Host {
				got[l["method"]+" "+l["code"]] += m.GetCounter().GetValue()
			}
		}
	}
	if got["GET 200"] != 1 || got["PATCH 409"] != 1 || len(got) != 2 {
		t.Errorf("rest_client_requests_total for %s: %v, want GET 200 and PATCH 409 once each", host.Host, got)
	}
}
