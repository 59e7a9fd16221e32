package main

import "testing"

func TestParseRequestsSumsEveryCodeAndHostByMethod(t *testing.T) {
	text := `# HELP rest_client_requests_total Number of HTTP requests, partitioned by status code, method, and host.
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="127.0.0.1:6443",method="GET"} 120
rest_client_requests_total{code="200",host="127.0.0.1:7000",method="GET"} 5
rest_client_requests_total{code="201",host="127.0.0.1:6443",method="POST"} 14
rest_client_requests_total{code="409",host="127.0.0.1:6443",method="PATCH"} 3
rest_client_requests_total{code="200",host="127.0.0.1:6443",method="PATCH"} 40
rest_client_requests_total{code="<error>",host="127.0.0.1:6443",method="DELETE"} 1
rest_client_requests_total_other{code="200",method="GET"} 999
rest_client_request_duration_seconds_bucket{le="0.1",verb="GET"} 77
`
	got, err := parseRequests(text)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"GET": 125, "POST": 14, "PATCH": 43, "DELETE": 1}
	if len(got.byMethod) != len(want) {
		t.Errorf("methods %v, want %v", got.byMethod, want)
	}
	for m, n := range want {
		if got.byMethod[m] != n {
			t.Errorf("%s = %d, want %d", m, got.byMethod[m], n)
		}
	}
	if got.total() != 183 || got.failed != 4 || got.failedByCode["409"] != 3 || got.failedByCode["<error>"] != 1 {
		t.Errorf("total %d failed %d %v, want 183 and 4 (3×409, 1×<error>)", got.total(), got.failed, got.failedByCode)
	}
}

func TestParseRequestsRejectsMalformedSamples(t *testing.T) {
	tests := []struct{ name, text string }{
		{"unterminated labels", `rest_client_requests_total{code="200",method="GET" 3`},
		{"unterminated value", `rest_client_requests_total{code="200,method=GET} 3`},
		{"no value", `rest_client_requests_total{code="200",method="GET"}`},
		{"bad value", `rest_client_requests_total{code="200",method="GET"} many`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := parseRequests(tt.text); err == nil {
				t.Error("no error")
			}
		})
	}
}

func TestParseLabelsUnescapes(t *testing.T) {
	got, err := parseLabels(`a="x\"y",b="back\\slash", c="line\nbreak"`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": `x"y`, "b": `back\slash`, "c": "line\nbreak"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}
