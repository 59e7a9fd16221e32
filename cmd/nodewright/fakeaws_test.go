package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nodewright/nodewright/providers/aws/fake"
)

// The fake serves on loopback only, says where, and answers AWS calls.
func TestFakeAWSServesOnLoopback(t *testing.T) {
	if _, err := run(t, "fake-aws", "--cluster-name", "x", "--listen", "0.0.0.0:0"); err == nil || !strings.Contains(err.Error(), "only loopback") {
		t.Errorf("a non-loopback address: %v, want it refused", err)
	}
	if _, err := run(t, "fake-aws"); err == nil || !strings.Contains(err.Error(), "--cluster-name") {
		t.Errorf("no cluster name: %v, want it asked for", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r, w := io.Pipe()
	done := make(chan error, 1)
	server, err := fake.New(fake.Options{World: fake.DefaultWorld("x")})
	if err != nil {
		t.Fatal(err)
	}
	go func() { done <- serveFakeAWS(ctx, "127.0.0.1:0", server, w) }()
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	endpoint := strings.Fields(line)[4]
	resp, err := http.Post(endpoint, "application/x-www-form-urlencoded", strings.NewReader("Action=DescribeSubnets&Version=2016-11-15&Filter.1.Name=tag:karpenter.sh/discovery&Filter.1.Value.1=x"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.Count(string(body), "<subnetId>") != 3 {
		t.Errorf("DescribeSubnets: %d %s", resp.StatusCode, body)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the fake did not stop")
	}
}
