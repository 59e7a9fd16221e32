package fake

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/nodewright/nodewright/pkg/catalog"
)

// Server is the fake AWS. Its zero value is not usable; use New.
type Server struct {
	mu      sync.Mutex
	region  string
	catalog []catalog.InstanceType
	world   World
	// faults answer the next calls of an action with an error; rates
	// answer calls of an action with an error at a rate.
	faults map[string][]Fault
	rates  map[string][]rateFault
	// injected counts the faults injected, by action and kind.
	injected map[string]int
	// lost are the SDK invocations whose answers were lost, oldest first
	// in lostOrder.
	lost      map[string]Fault
	lostOrder []string
	// requests counts the calls per action, for tests.
	requests map[string]int
	nextID   int
	clock    clock.PassiveClock
	// templates and instances are what callers made.
	templates []LaunchTemplate
	instances map[string]*Instance
	// ice are pools CreateFleet finds no capacity in.
	ice map[pool]bool
	// fleets are CreateFleet answers by client token.
	fleets map[string]fleetReplay
	// describeLag hides launched instances from DescribeInstances.
	describeLag time.Duration
	// queues are SQS queues by name.
	queues map[string]*queue
}

// Options shape a fake.
type Options struct {
	// Region is the region answers speak of (default us-east-1).
	Region string
	// InstanceTypes are the types and offerings it sells (default: the
	// embedded catalog).
	InstanceTypes []catalog.InstanceType
	// World is the VPC, images and roles it starts with (see DefaultWorld).
	World World
	// Clock stamps launch times (default: the real clock).
	Clock clock.PassiveClock
	// DescribeLag is how long an instance CreateFleet launched stays
	// unknown to DescribeInstances, as EC2 is eventually consistent
	// (default 0: seen at once).
	DescribeLag time.Duration
}

// Fault is an injected failure: an HTTP status and an AWS error code,
// or (Status 0) only a delay before the call is answered as usual.
type Fault struct {
	Status  int
	Code    string
	Message string
	// Delay holds the answer back this long (a slow endpoint).
	Delay time.Duration
	// Lost carries the call out before failing it: the answer is lost
	// (see LostResponse).
	Lost bool
}

// Slow is a fault that only delays an answer by d.
func Slow(d time.Duration) Fault { return Fault{Delay: d} }

// Throttled is the answer AWS gives a caller over its request rate.
var Throttled = Fault{Status: http.StatusServiceUnavailable, Code: "RequestLimitExceeded", Message: "Request limit exceeded."}

// Unavailable is a server-side failure.
var Unavailable = Fault{Status: http.StatusInternalServerError, Code: "InternalError", Message: "An internal error has occurred."}

// New returns a fake serving opts.
func New(opts Options) (*Server, error) {
	if opts.Region == "" {
		opts.Region = "us-east-1"
	}
	if opts.InstanceTypes == nil {
		types, err := catalog.Default()
		if err != nil {
			return nil, fmt.Errorf("fake aws: %w", err)
		}
		opts.InstanceTypes = types
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	queues := map[string]*queue{}
	for _, name := range opts.World.Queues {
		queues[name] = &queue{name: name}
	}
	return &Server{region: opts.Region, catalog: opts.InstanceTypes, world: opts.World.clone(), clock: opts.Clock,
		faults: map[string][]Fault{}, rates: map[string][]rateFault{}, injected: map[string]int{}, lost: map[string]Fault{},
		requests: map[string]int{}, instances: map[string]*Instance{}, ice: map[pool]bool{}, queues: queues,
		fleets: map[string]fleetReplay{}, describeLag: opts.DescribeLag}, nil
}

// Fail makes the next n calls of action (e.g. "DescribeSubnets",
// "GetParameter") fail with f.
func (s *Server) Fail(action string, f Fault, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.faults[action] = append(s.faults[action], f)
	}
}

// Requests is how many calls of action the fake has answered (failed ones
// included).
func (s *Server) Requests(action string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[action]
}

// ServeHTTP answers one AWS call: JSON protocols are told apart by their
// X-Amz-Target header, Query protocols by their Action parameter.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 10<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if target := r.Header.Get("X-Amz-Target"); target != "" {
		s.serveJSON(r.Context(), w, target, r.Header.Get(invocationHeader), body)
		return
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		writeQueryError(w, Fault{Status: http.StatusBadRequest, Code: "MalformedQueryString", Message: err.Error()})
		return
	}
	action := form.Get("Action")
	actions, document := ec2Actions, writeQueryError
	if form.Get("Version") == "2010-05-08" {
		actions, document = iamActions, writeIAMError
	}
	f, failed := s.take(action, r.Header.Get(invocationHeader))
	if failed && !f.Lost {
		document(w, f)
		return
	}
	handler, ok := actions[action]
	if !ok {
		document(w, Fault{Status: http.StatusBadRequest, Code: "InvalidAction", Message: fmt.Sprintf("the fake does not implement %s", action)})
		return
	}
	s.mu.Lock()
	out, fault := handler(s, query(form))
	s.mu.Unlock()
	if failed {
		lose(w, f, document)
		return
	}
	if fault != nil {
		document(w, *fault)
		return
	}
	var buf bytes.Buffer
	buf.WriteString(xml.Header)
	if err := xml.NewEncoder(&buf).Encode(out); err != nil {
		document(w, Fault{Status: http.StatusInternalServerError, Code: "InternalError", Message: err.Error()})
		return
	}
	writeBody(w, "text/xml;charset=UTF-8", http.StatusOK, buf.Bytes())
}

// writeBody answers with a whole body and its length.
func writeBody(w http.ResponseWriter, contentType string, status int, body []byte) {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// call runs a JSON handler under the server's lock.
func (s *Server) call(handler func(*Server, []byte) (any, *Fault), body []byte) (any, *Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return handler(s, body)
}

// serveJSON answers the JSON protocols (SSM, SQS).
func (s *Server) serveJSON(ctx context.Context, w http.ResponseWriter, target, invocation string, body []byte) {
	service, action, _ := strings.Cut(target, ".")
	f, failed := s.take(action, invocation)
	if failed && !f.Lost {
		writeJSONError(w, f)
		return
	}
	handler, ok := jsonActions[service+"."+action]
	if !ok {
		writeJSONError(w, Fault{Status: http.StatusBadRequest, Code: "UnknownOperationException", Message: fmt.Sprintf("the fake does not implement %s", target)})
		return
	}
	out, fault := s.call(handler, body)
	// SQS long polling: ask again until a message comes or the wait ends.
	if action == "ReceiveMessage" && fault == nil {
		deadline := time.Now().Add(longPoll(body))
		for len(out.(map[string]any)["Messages"].([]sqsMessage)) == 0 && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
			out, fault = s.call(handler, body)
			if fault != nil {
				break
			}
		}
	}
	if failed {
		lose(w, f, writeJSONError)
		return
	}
	if fault != nil {
		writeJSONError(w, *fault)
		return
	}
	body, err := json.Marshal(out)
	if err != nil {
		writeJSONError(w, Fault{Status: http.StatusInternalServerError, Code: "InternalError", Message: err.Error()})
		return
	}
	contentType := "application/x-amz-json-1.1"
	if service == "AmazonSQS" {
		contentType = "application/x-amz-json-1.0"
	}
	writeBody(w, contentType, http.StatusOK, body)
}

// queryError is EC2's error document.
type queryError struct {
	XMLName xml.Name `xml:"Response"`
	Errors  struct {
		Error struct {
			Code    string `xml:"Code"`
			Message string `xml:"Message"`
		} `xml:"Error"`
	} `xml:"Errors"`
	RequestID string `xml:"RequestID"`
}

func writeQueryError(w http.ResponseWriter, f Fault) {
	var e queryError
	e.Errors.Error.Code, e.Errors.Error.Message, e.RequestID = f.Code, f.Message, "fake-request"
	body, _ := xml.Marshal(e) // plain strings: cannot fail
	writeBody(w, "text/xml;charset=UTF-8", f.Status, append([]byte(xml.Header), body...))
}

// iamError is IAM's error document.
type iamError struct {
	XMLName xml.Name `xml:"ErrorResponse"`
	Error   struct {
		Type    string `xml:"Type"`
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	} `xml:"Error"`
	RequestID string `xml:"RequestId"`
}

func writeIAMError(w http.ResponseWriter, f Fault) {
	var e iamError
	e.Error.Type, e.Error.Code, e.Error.Message, e.RequestID = "Sender", f.Code, f.Message, "fake-request"
	if f.Status >= 500 {
		e.Error.Type = "Receiver"
	}
	body, _ := xml.Marshal(e) // plain strings: cannot fail
	writeBody(w, "text/xml;charset=UTF-8", f.Status, append([]byte(xml.Header), body...))
}

func writeJSONError(w http.ResponseWriter, f Fault) {
	body, _ := json.Marshal(map[string]string{"__type": f.Code, "message": f.Message}) // plain strings: cannot fail
	writeBody(w, "application/x-amz-json-1.1", f.Status, body)
}

// newID returns a fresh resource id with prefix ("i-", "lt-", ...).
func (s *Server) newID(prefix string) string {
	s.nextID++
	return fmt.Sprintf("%s%017x", prefix, s.nextID)
}
