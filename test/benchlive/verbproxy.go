package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sort"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certutil "k8s.io/client-go/util/cert"
)

// verbProxy is a TLS reverse proxy on loopback in front of the apiserver,
// used by the controller only. It counts requests by Kubernetes verb — what
// rest_client_requests_total cannot tell apart, since LIST and WATCH are
// HTTP GETs — and relays everything else untouched (HTTP/2 both ways,
// watches streamed).
type verbProxy struct {
	// kubeconfig is the path of a kubeconfig whose server is the proxy.
	kubeconfig string

	server *http.Server
	mu     sync.Mutex
	counts map[string]int64
	// detail counts requests by verb, resource and answer ("PATCH
	// pods/status 409").
	detail map[string]int64
}

// startVerbProxy starts the proxy and writes its kubeconfig; the proxy's
// own errors (a watch cut when the controller stops) go to errLog.
func startVerbProxy(upstream *rest.Config, kubeconfigPath string, errLog io.Writer) (*verbProxy, error) {
	target, err := url.Parse(upstream.Host)
	if err != nil {
		return nil, fmt.Errorf("verb proxy: parsing the apiserver address %q: %w", upstream.Host, err)
	}
	transport, err := rest.TransportFor(upstream)
	if err != nil {
		return nil, fmt.Errorf("verb proxy: building the apiserver transport: %w", err)
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		return nil, fmt.Errorf("verb proxy: generating a serving certificate: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("verb proxy: loading its certificate: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("verb proxy: listening: %w", err)
	}
	p := &verbProxy{kubeconfig: kubeconfigPath, counts: map[string]int64{}, detail: map[string]int64{}}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = target.Host
		},
		Transport:     transport,
		FlushInterval: -1, // watches: every event as it comes
		ErrorLog:      log.New(errLog, "verb proxy: ", log.LstdFlags),
	}
	p.server = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			verb := classify(r.Method, r.URL)
			p.count(verb)
			sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
			rp.ServeHTTP(sw, r)
			p.countDetail(fmt.Sprintf("%s %s %d", verb, resourceOf(r.URL), sw.status))
		}),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}},
	}
	go func() {
		if err := p.server.ServeTLS(l, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(errLog, "verb proxy stopped: %v\n", err)
		}
	}()

	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["bench"] = &clientcmdapi.Cluster{Server: "https://" + l.Addr().String(), CertificateAuthorityData: certPEM}
	cfg.AuthInfos["bench"] = &clientcmdapi.AuthInfo{} // the proxy authenticates upstream
	cfg.Contexts["bench"] = &clientcmdapi.Context{Cluster: "bench", AuthInfo: "bench"}
	cfg.CurrentContext = "bench"
	if err := clientcmd.WriteToFile(*cfg, kubeconfigPath); err != nil {
		_ = p.server.Close()
		return nil, fmt.Errorf("verb proxy: writing %s: %w", kubeconfigPath, err)
	}
	return p, nil
}

func (p *verbProxy) count(verb string) {
	p.mu.Lock()
	p.counts[verb]++
	p.mu.Unlock()
}

func (p *verbProxy) countDetail(key string) {
	p.mu.Lock()
	p.detail[key]++
	p.mu.Unlock()
}

// writeDetail writes the requests by verb, resource and answer, most
// frequent first.
func (p *verbProxy) writeDetail(w io.Writer) {
	p.mu.Lock()
	keys := make([]string, 0, len(p.detail))
	for k := range p.detail {
		keys = append(keys, k)
	}
	counts := maps.Clone(p.detail)
	p.mu.Unlock()
	sort.Slice(keys, func(i, j int) bool {
		if counts[keys[i]] != counts[keys[j]] {
			return counts[keys[i]] > counts[keys[j]]
		}
		return keys[i] < keys[j]
	})
	for _, k := range keys {
		fmt.Fprintf(w, "%8d %s\n", counts[k], k)
	}
}

// statusWriter remembers the status code of a response.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// Flush streams watch events through (the reverse proxy flushes each).
func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// resourceOf names the resource of an API path, with its subresource
// ("pods/status"); "-" for discovery and other non-resource paths.
func resourceOf(u *url.URL) string {
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	var rest []string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		rest = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		rest = parts[3:]
	default:
		return "-"
	}
	if len(rest) > 0 && rest[0] == "watch" {
		rest = rest[1:]
	}
	if len(rest) >= 3 && rest[0] == "namespaces" {
		rest = rest[2:]
	}
	switch len(rest) {
	case 0:
		return "-"
	case 1, 2:
		return rest[0]
	default:
		return rest[0] + "/" + rest[2]
	}
}

// snapshot returns the counts so far.
func (p *verbProxy) snapshot() map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int64, len(p.counts))
	for k, v := range p.counts {
		out[k] = v
	}
	return out
}

func (p *verbProxy) close(ctx context.Context) {
	_ = p.server.Shutdown(ctx)
	_ = p.server.Close() // open watches do not end on Shutdown
}

// classify names the Kubernetes verb of a request: GET on a collection is
// LIST, with watch=true (or under /watch/) WATCH; discovery and other
// non-resource GETs stay GET; other methods are their own name.
func classify(method string, u *url.URL) string {
	method = strings.ToUpper(method)
	if method != http.MethodGet {
		return method
	}
	if w := u.Query().Get("watch"); w == "true" || w == "1" {
		return "WATCH"
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	var rest []string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		rest = parts[2:] // api/v1/...
	case len(parts) >= 3 && parts[0] == "apis":
		rest = parts[3:] // apis/group/version/...
	default:
		return "GET" // /version, /openapi, discovery
	}
	if len(rest) > 0 && rest[0] == "watch" {
		return "WATCH"
	}
	if len(rest) >= 3 && rest[0] == "namespaces" {
		rest = rest[2:] // a namespaced resource
	}
	if len(rest) == 1 {
		return "LIST"
	}
	return "GET" // discovery of the group version, one object, or a subresource
}
