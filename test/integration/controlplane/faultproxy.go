package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// FaultOptions say how often a FaultProxy fails the writes it relays. The
// rates are probabilities per write request (POST, PUT, PATCH, DELETE);
// their sum must not exceed 1. Reads and watches are never failed.
type FaultOptions struct {
	// Seed seeds the draws: the same seed gives the same sequence of
	// faults over the same sequence of writes.
	Seed int64
	// WriteErrorRate: the write is answered 500 InternalError and never
	// reaches the apiserver.
	WriteErrorRate float64
	// ConflictRate: the write is answered 409 Conflict and never reaches
	// the apiserver.
	ConflictRate float64
	// LostAnswerRate: the write is performed by the apiserver, but the
	// client is answered 500 InternalError instead of the result.
	LostAnswerRate float64
}

// FaultCounts are the writes a FaultProxy relayed, by outcome.
type FaultCounts struct {
	// Writes is every write request received, failed or not.
	Writes int64
	// WriteErrors, Conflicts and LostAnswers are the faults injected.
	WriteErrors, Conflicts, LostAnswers int64
}

// Faults is the number of faults injected, all kinds together.
func (c FaultCounts) Faults() int64 { return c.WriteErrors + c.Conflicts + c.LostAnswers }

func (c FaultCounts) String() string {
	return fmt.Sprintf("%d writes: %d write errors, %d conflicts, %d lost answers", c.Writes, c.WriteErrors, c.Conflicts, c.LostAnswers)
}

// FaultProxy is a reverse proxy in front of the kube-apiserver, on
// loopback, that fails a seeded share of the writes it relays. Clients
// that should see the faults use Kubeconfig (or Config); everyone else
// keeps talking to the apiserver directly.
type FaultProxy struct {
	// Kubeconfig is the path of a kubeconfig file whose server is the
	// proxy (plain HTTP on 127.0.0.1; the proxy authenticates upstream).
	Kubeconfig string
	// Config is the same as a rest.Config.
	Config *rest.Config

	opts   FaultOptions
	mu     sync.Mutex
	rng    *rand.Rand
	server *http.Server
	done   chan struct{}

	writes, writeErrors, conflicts, lostAnswers atomic.Int64
}

// fault is what the proxy does to one write.
type fault int

const (
	faultNone fault = iota
	faultWriteError
	faultConflict
	faultLostAnswer
)

type faultKey struct{}

// errAnswerLost marks a response the proxy threw away after the apiserver
// performed the write.
var errAnswerLost = errors.New("the answer of the apiserver was lost")

// StartFaultProxy starts a FaultProxy in front of cp's apiserver. It stops
// when ctx ends or Close is called.
func StartFaultProxy(ctx context.Context, cp *ControlPlane, opts FaultOptions) (*FaultProxy, error) {
	for _, r := range []float64{opts.WriteErrorRate, opts.ConflictRate, opts.LostAnswerRate} {
		if r < 0 || r > 1 {
			return nil, fmt.Errorf("fault proxy: rate %v is not within [0, 1]", r)
		}
	}
	if sum := opts.WriteErrorRate + opts.ConflictRate + opts.LostAnswerRate; sum > 1 {
		return nil, fmt.Errorf("fault proxy: the rates add up to %v, more than 1", sum)
	}
	upstream, err := url.Parse(cp.Config.Host)
	if err != nil {
		return nil, fmt.Errorf("fault proxy: parsing the apiserver address %q: %w", cp.Config.Host, err)
	}
	// The admin's transport: TLS with the apiserver's CA and the bearer
	// token, as the admin kubeconfig has it.
	transport, err := rest.TransportFor(cp.Config)
	if err != nil {
		return nil, fmt.Errorf("fault proxy: building the apiserver transport: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fault proxy: listening: %w", err)
	}
	p := &FaultProxy{opts: opts, rng: rand.New(rand.NewSource(opts.Seed)), done: make(chan struct{})}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(upstream)
			r.Out.Host = upstream.Host
		},
		Transport:      transport,
		FlushInterval:  -1, // watches stream each event at once
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.errorHandler,
	}
	p.server = &http.Server{Handler: p.handler(rp), ReadHeaderTimeout: 10 * time.Second}
	host := "http://" + l.Addr().String()
	p.Config = &rest.Config{Host: host, QPS: cp.Config.QPS, Burst: cp.Config.Burst}
	if err := p.writeKubeconfig(cp.Dir, l.Addr().(*net.TCPAddr).Port); err != nil {
		l.Close()
		return nil, err
	}
	go func() {
		defer close(p.done)
		_ = p.server.Serve(l)
	}()
	go func() {
		select {
		case <-ctx.Done():
			_ = p.Close()
		case <-p.done:
		}
	}()
	return p, nil
}

// Close stops the proxy, cutting open watches.
func (p *FaultProxy) Close() error {
	err := p.server.Close()
	<-p.done
	return err
}

// Counts returns the writes relayed so far, by outcome.
func (p *FaultProxy) Counts() FaultCounts {
	return FaultCounts{Writes: p.writes.Load(), WriteErrors: p.writeErrors.Load(), Conflicts: p.conflicts.Load(), LostAnswers: p.lostAnswers.Load()}
}

func (p *FaultProxy) handler(rp *httputil.ReverseProxy) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isWrite(r.Method) {
			rp.ServeHTTP(w, r)
			return
		}
		p.writes.Add(1)
		switch f := p.draw(); f {
		case faultWriteError:
			p.writeErrors.Add(1)
			writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, "injected by the fault proxy: the write failed")
		case faultConflict:
			p.conflicts.Add(1)
			writeStatus(w, http.StatusConflict, metav1.StatusReasonConflict, "injected by the fault proxy: the object has been modified; please apply your changes to the latest version and try again")
		default:
			rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), faultKey{}, f)))
		}
	})
}

// draw picks what happens to the next write.
func (p *FaultProxy) draw() fault {
	p.mu.Lock()
	x := p.rng.Float64()
	p.mu.Unlock()
	switch o := p.opts; {
	case x < o.WriteErrorRate:
		return faultWriteError
	case x < o.WriteErrorRate+o.ConflictRate:
		return faultConflict
	case x < o.WriteErrorRate+o.ConflictRate+o.LostAnswerRate:
		return faultLostAnswer
	}
	return faultNone
}

// modifyResponse throws away the answer of a write drawn to lose it, once
// the apiserver has performed it.
func (p *FaultProxy) modifyResponse(resp *http.Response) error {
	if f, _ := resp.Request.Context().Value(faultKey{}).(fault); f != faultLostAnswer {
		return nil
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return errAnswerLost
}

func (p *FaultProxy) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, errAnswerLost) {
		p.lostAnswers.Add(1)
		writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, "injected by the fault proxy: the write was performed but its answer was lost")
		return
	}
	if r.Context().Err() != nil {
		return // the client went away (a watch ended, a process was killed)
	}
	writeStatus(w, http.StatusBadGateway, metav1.StatusReasonServiceUnavailable, "fault proxy: relaying to the apiserver: "+err.Error())
}

func isWrite(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// writeStatus answers a Kubernetes Status, as the apiserver would.
func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string) {
	status := metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure,
		Message:  msg,
		Reason:   reason,
		Code:     int32(code),
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(status)
}

func (p *FaultProxy) writeKubeconfig(dir string, port int) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["nodewright-faults"] = &clientcmdapi.Cluster{Server: p.Config.Host}
	cfg.AuthInfos["proxied"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["nodewright-faults"] = &clientcmdapi.Context{Cluster: "nodewright-faults", AuthInfo: "proxied"}
	cfg.CurrentContext = "nodewright-faults"
	p.Kubeconfig = filepath.Join(dir, fmt.Sprintf("kubeconfig-faults-%d", port))
	if err := clientcmd.WriteToFile(*cfg, p.Kubeconfig); err != nil {
		return fmt.Errorf("fault proxy: writing kubeconfig: %w", err)
	}
	return nil
}
