package main

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
)

// requestCounts are a client's API requests by HTTP method, as client-go
// counts them in rest_client_requests_total (every code, every host).
type requestCounts struct {
	byMethod map[string]int64
	// failed counts answers other than 2xx (and client-side errors, code
	// "<error>"), failedByCode the same by code.
	failed       int64
	failedByCode map[string]int64
}

func (r requestCounts) total() int64 {
	var t int64
	for _, n := range r.byMethod {
		t += n
	}
	return t
}

const requestsMetric = "rest_client_requests_total"

// parseRequests reads rest_client_requests_total from a Prometheus text
// exposition.
func parseRequests(text string) (requestCounts, error) {
	out := requestCounts{byMethod: map[string]int64{}, failedByCode: map[string]int64{}}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, requestsMetric)
		if !ok || !strings.HasPrefix(rest, "{") {
			continue
		}
		closing := strings.LastIndexByte(rest, '}')
		if closing < 0 {
			return requestCounts{}, fmt.Errorf("%s: unterminated labels in %q", requestsMetric, line)
		}
		labels, err := parseLabels(rest[1:closing])
		if err != nil {
			return requestCounts{}, fmt.Errorf("%s: %q: %w", requestsMetric, line, err)
		}
		fields := strings.Fields(rest[closing+1:])
		if len(fields) == 0 {
			return requestCounts{}, fmt.Errorf("%s: no value in %q", requestsMetric, line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return requestCounts{}, fmt.Errorf("%s: value of %q: %w", requestsMetric, line, err)
		}
		n := int64(v)
		out.byMethod[strings.ToUpper(labels["method"])] += n
		if !strings.HasPrefix(labels["code"], "2") {
			out.failed += n
			out.failedByCode[labels["code"]] += n
		}
	}
	if err := sc.Err(); err != nil {
		return requestCounts{}, fmt.Errorf("reading metrics: %w", err)
	}
	return out, nil
}

// parseLabels reads `a="x",b="y"` with Prometheus' escapes (\\, \", \n).
func parseLabels(s string) (map[string]string, error) {
	labels := map[string]string{}
	for len(s) > 0 {
		eq := strings.IndexByte(s, '=')
		if eq < 0 || eq+1 >= len(s) || s[eq+1] != '"' {
			return nil, fmt.Errorf("label %q: want name=\"value\"", s)
		}
		name := strings.TrimSpace(s[:eq])
		var val strings.Builder
		i := eq + 2
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
				if s[i] == 'n' {
					val.WriteByte('\n')
					continue
				}
			}
			val.WriteByte(s[i])
		}
		if i >= len(s) {
			return nil, fmt.Errorf("label %s: unterminated value", name)
		}
		labels[name] = val.String()
		s = strings.TrimPrefix(strings.TrimSpace(s[i+1:]), ",")
	}
	return labels, nil
}
