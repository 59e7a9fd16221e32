package controlplane

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"time"
)

// insecureLoopback probes the health endpoints of kube-controller-manager and
// kube-scheduler, which serve self-signed certificates on 127.0.0.1.
var insecureLoopback = &http.Client{
	Timeout: 2 * time.Second,
	Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback health probe of a child process
	},
}

// httpGet succeeds when url answers 200 OK.
func httpGet(client *http.Client, url string) error {
	if client == nil {
		client = &http.Client{Timeout: 2 * time.Second}
	}
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return nil
}
