package main

import (
	"context"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

func TestClassifyNamesTheKubernetesVerb(t *testing.T) {
	tests := []struct{ method, url, want string }{
		{"GET", "/api/v1/nodes", "LIST"},
		{"GET", "/api/v1/nodes?limit=500&resourceVersion=0", "LIST"},
		{"GET", "/api/v1/nodes?watch=true&resourceVersion=12", "WATCH"},
		{"GET", "/api/v1/nodes/n1", "GET"},
		{"GET", "/api/v1/nodes/n1/status", "GET"},
		{"GET", "/api/v1/pods", "LIST"},
		{"GET", "/api/v1/namespaces/default/pods", "LIST"},
		{"GET", "/api/v1/namespaces/default/pods/p1", "GET"},
		{"GET", "/api/v1/namespaces", "LIST"},
		{"GET", "/api/v1/namespaces/default", "GET"},
		{"GET", "/api/v1/watch/pods", "WATCH"},
		{"GET", "/apis/karpenter.sh/v1/nodeclaims", "LIST"},
		{"GET", "/apis/karpenter.sh/v1/nodeclaims?allowWatchBookmarks=true&watch=1", "WATCH"},
		{"GET", "/apis/karpenter.sh/v1/nodeclaims/nc-1", "GET"},
		{"GET", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/l", "GET"},
		{"GET", "/apis/karpenter.sh/v1", "GET"},
		{"GET", "/api", "GET"},
		{"GET", "/version", "GET"},
		{"POST", "/api/v1/namespaces/default/pods/p1/eviction", "POST"},
		{"patch", "/api/v1/nodes/n1", "PATCH"},
		{"PUT", "/apis/karpenter.sh/v1/nodeclaims/nc-1/status", "PUT"},
		{"DELETE", "/api/v1/nodes/n1", "DELETE"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.url, func(t *testing.T) {
			u, err := url.Parse(tt.url)
			if err != nil {
				t.Fatal(err)
			}
			if got := classify(tt.method, u); got != tt.want {
				t.Errorf("classify = %s, want %s", got, tt.want)
			}
		})
	}
}

// A client given the proxy's kubeconfig reaches the upstream server, which
// sees the upstream credentials, and its requests are counted by verb.
func TestVerbProxyRelaysAndCounts(t *testing.T) {
	var sawToken atomic.Bool
	upstream := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawToken.Store(r.Header.Get("Authorization") == "Bearer secret")
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Success","path":"`+r.URL.Path+`"}`)
	}))
	defer upstream.Close()
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: upstream.Certificate().Raw})
	p, err := startVerbProxy(&rest.Config{Host: upstream.URL, BearerToken: "secret", TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}},
		filepath.Join(t.TempDir(), "kubeconfig"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close(context.Background())

	cfg, err := clientcmd.BuildConfigFromFlags("", p.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/api/v1/nodes", "/api/v1/nodes", "/api/v1/nodes/n1", "/api/v1/nodes?watch=true"} {
		resp, err := hc.Get(cfg.Host + path)
		if err != nil {
			t.Fatalf("GET %s through the proxy: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(body) == 0 {
			t.Fatalf("GET %s: %s %q", path, resp.Status, body)
		}
		if resp.ProtoMajor != 2 {
			t.Errorf("GET %s: served over %s, want HTTP/2 as the apiserver serves", path, resp.Proto)
		}
	}
	if !sawToken.Load() {
		t.Error("upstream did not receive the upstream bearer token")
	}
	got := p.snapshot()
	want := map[string]int64{"LIST": 2, "GET": 1, "WATCH": 1}
	if len(got) != len(want) {
		t.Errorf("counts %v, want %v", got, want)
	}
	for v, n := range want {
		if got[v] != n {
			t.Errorf("%s = %d, want %d", v, got[v], n)
		}
	}
}

func TestResourceOf(t *testing.T) {
	for path, want := range map[string]string{
		"/api/v1/namespaces/default/pods/web-1/status":               "pods/status",
		"/api/v1/namespaces/default/pods":                            "pods",
		"/api/v1/nodes/ip-1":                                         "nodes",
		"/apis/karpenter.sh/v1/nodeclaims/default-abc/status":        "nodeclaims/status",
		"/apis/coordination.k8s.io/v1/namespaces/x/leases/y":         "leases",
		"/api/v1/watch/namespaces/default/pods":                      "pods",
		"/apis/karpenter.sh/v1":                                      "-",
		"/version":                                                   "-",
		"/api/v1/namespaces/default/pods/web-1/eviction":             "pods/eviction",
		"/apis/events.k8s.io/v1/namespaces/default/events":           "events",
		"/apis/karpenter.sh/v1/nodepools/default/status":             "nodepools/status",
		"/api/v1/namespaces/kube-node-lease":                         "namespaces",
		"/apis/apps/v1/namespaces/default/deployments/bench-a/scale": "deployments/scale",
	} {
		u, err := url.Parse(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := resourceOf(u); got != want {
			t.Errorf("resourceOf(%s) = %q, want %q", path, got, want)
		}
	}
}
