package transport_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/nodewright/nodewright/providers/aws/transport"
)

// closingBody fails reads once closed, as the SDK's request stream does.
type closingBody struct {
	r      io.Reader
	closed bool
}

func (b *closingBody) Read(p []byte) (int, error) {
	if b.closed {
		return 0, errors.New("read on closed body")
	}
	return b.r.Read(p)
}

func (b *closingBody) Close() error { b.closed = true; return nil }

// transport reads the request body the way http.Transport's write loop
// does: after the caller may have closed its stream.
type recorder struct {
	original *closingBody
	got      string
}

func (tr *recorder) Do(r *http.Request) (*http.Response, error) {
	tr.original.Close() // the SDK closes its stream once a response is under way
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	tr.got = string(b)
	return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
}

// The body sent is read whole before the request leaves, so the SDK
// closing its stream early cannot cut the request (and the connection).
func TestBufferedBodiesSurviveAnEarlyClose(t *testing.T) {
	body := &closingBody{r: strings.NewReader("Action=DescribeInstanceTypes&Version=2016-11-15")}
	inner := &recorder{original: body}
	req, err := http.NewRequest(http.MethodPost, "http://fake.invalid", body)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := transport.BufferedBodies(inner).Do(req); err != nil {
		t.Fatalf("with buffered bodies: %v", err)
	}
	if inner.got != "Action=DescribeInstanceTypes&Version=2016-11-15" || req.ContentLength != int64(len(inner.got)) {
		t.Errorf("sent %q (content length %d)", inner.got, req.ContentLength)
	}
	unbuffered := &closingBody{r: strings.NewReader("x")}
	req, _ = http.NewRequest(http.MethodPost, "http://fake.invalid", unbuffered)
	if _, err := (&recorder{original: unbuffered}).Do(req); err == nil {
		t.Error("the unbuffered stream survived its close: the test shows nothing")
	}
}
