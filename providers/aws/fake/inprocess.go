package fake

import (
	"net/http"
	"net/http/httptest"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// handlerClient is an HTTP client that hands each request to a handler in
// the same process: no sockets, no servers to close. The caller's context
// still bounds the wait. A handler that aborts (http.ErrAbortHandler, a
// dropped connection) gives a transport error, as over a socket.
type handlerClient struct{ h http.Handler }

func (c handlerClient) Do(r *http.Request) (*http.Response, error) {
	w := httptest.NewRecorder()
	done := make(chan bool, 1)
	go func() {
		aborted := false
		defer func() {
			if v := recover(); v != nil {
				if v != http.ErrAbortHandler {
					panic(v)
				}
				aborted = true
			}
			done <- aborted
		}()
		c.h.ServeHTTP(w, r)
	}()
	select {
	case aborted := <-done:
		if aborted {
			return nil, errDropped
		}
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
	resp := w.Result()
	resp.Request = r
	return resp, nil
}

// InProcessConfig is an aws-sdk-go-v2 configuration whose clients call s
// directly, in process (the simulator's AWS).
func InProcessConfig(s *Server) aws.Config {
	cfg := Config("http://fake-aws.invalid")
	cfg.HTTPClient = handlerClient{h: s}
	return cfg
}
