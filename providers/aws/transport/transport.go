// Package transport holds what the AWS SDK's HTTP transport needs from
// Nodewright: request bodies buffered before they are sent.
package transport

import (
	"bytes"
	"fmt"
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// BufferedBodies wraps an SDK HTTP client so each request body is read
// into memory before it is sent. smithy-go closes a request's body stream
// as soon as the response headers arrive; when the transport has not yet
// seen the end of the body by then (the server answered on the last
// byte), its write loop fails and closes the connection under the
// response being read: "use of closed network connection" (measured on
// loopback under load: 19 of 40 paginations of DescribeInstanceTypes
// failed once without retries, none with the bodies buffered). Query and
// JSON requests are small, so buffering costs nothing that matters.
func BufferedBodies(c aws.HTTPClient) aws.HTTPClient {
	if c == nil {
		c = http.DefaultClient
	}
	return bufferedBodies{inner: c}
}

type bufferedBodies struct{ inner aws.HTTPClient }

func (b bufferedBodies) Do(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.Body != http.NoBody {
		buf, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, fmt.Errorf("reading the request body: %w", err)
		}
		r.Body = io.NopCloser(bytes.NewReader(buf))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf)), nil }
		r.ContentLength = int64(len(buf))
	}
	return b.inner.Do(r)
}
