package fake

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"time"
)

// LostResponse is the fault of a call that was carried out but whose answer
// never reached the caller: the fake does what was asked (a CreateFleet
// launches its instances) and then drops the connection. Callers see a
// transport error (which the SDK does not retry) and cannot tell whether
// anything happened. A Lost fault with a Status answers that error instead
// of dropping the connection (a 500 the SDK retries, for instance).
var LostResponse = Fault{Lost: true}

// LostWith500 is a lost answer reported as an internal error: the call was
// carried out, and the caller is told it failed.
var LostWith500 = Fault{Status: http.StatusInternalServerError, Code: "InternalError", Message: "An internal error has occurred.", Lost: true}

// rateFault answers a call of an action with a fault at a rate.
type rateFault struct {
	fault Fault
	rate  float64
	rng   *rand.Rand
}

// FailRate makes each call of action fail with f with probability rate,
// drawn from rng (seeded by the caller, so a run can be replayed; the
// fake draws under its lock, in the order calls arrive). Faults queued by
// Fail come first. A rate of 0 or less removes f's rate for action.
func (s *Server) FailRate(action string, f Fault, rate float64, rng *rand.Rand) {
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := s.rates[action][:0]
	for _, r := range s.rates[action] {
		if r.fault != f {
			kept = append(kept, r)
		}
	}
	if rate > 0 {
		if rng == nil {
			rng = rand.New(rand.NewPCG(1, 2))
		}
		kept = append(kept, rateFault{fault: f, rate: min(rate, 1), rng: rng})
	}
	s.rates[action] = kept
}

// LoseResponses has each call of action carried out and then its answer
// lost (LostResponse) with probability rate, drawn from rng: for
// CreateFleet, the instances are launched and the caller gets an error.
func (s *Server) LoseResponses(action string, rate float64, rng *rand.Rand) {
	s.FailRate(action, LostResponse, rate, rng)
}

// Injected counts the faults the fake has injected, queued or drawn, by
// action and kind: "CreateFleet/lost", "DescribeInstances/RequestLimitExceeded",
// "GetParameter/slow".
func (s *Server) Injected() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.injected))
	for k, v := range s.injected {
		out[k] = v
	}
	return out
}

// kind names a fault in Injected's keys.
func (f Fault) kind() string {
	switch {
	case f.Lost:
		return "lost"
	case f.Status == 0:
		return "slow"
	}
	return f.Code
}

// invocationHeader is the header the AWS SDKs send, the same on every
// retry of one call.
const invocationHeader = "Amz-Sdk-Invocation-Id"

// lostKept is how many invocations whose answers were lost the fake
// remembers, so their retries are lost too.
const lostKept = 256

// take counts a call and picks the fault it meets, if any: a queued one
// first, else one drawn at its rate. A Lost fault sticks to the SDK
// invocation (its retries carry the same invocation id): the caller's
// call as a whole gets no answer, however often the SDK retries it, and
// the fault counts once. A delay is waited out here (real time); the call
// then goes on unless the fault has a status or is Lost. It is called
// without the lock held.
func (s *Server) take(action, invocation string) (Fault, bool) {
	s.mu.Lock()
	s.requests[action]++
	var f Fault
	found := false
	if lost, ok := s.lost[invocation]; ok && invocation != "" {
		f, found = lost, true
	} else if q := s.faults[action]; len(q) > 0 {
		s.faults[action] = q[1:]
		f, found = q[0], true
	} else {
		for _, r := range s.rates[action] {
			if r.rng.Float64() < r.rate {
				f, found = r.fault, true
				break
			}
		}
	}
	if _, retried := s.lost[invocation]; found && !retried {
		s.injected[action+"/"+f.kind()]++
		if f.Lost && invocation != "" {
			s.lost[invocation] = f
			s.lostOrder = append(s.lostOrder, invocation)
			if len(s.lostOrder) > lostKept {
				delete(s.lost, s.lostOrder[0])
				s.lostOrder = s.lostOrder[1:]
			}
		}
	}
	s.mu.Unlock()
	if found && f.Delay > 0 {
		time.Sleep(f.Delay)
	}
	return f, found && (f.Status != 0 || f.Lost)
}

// lose answers a call that was carried out with its fault: an error
// document, or (no status) a dropped connection.
func lose(w http.ResponseWriter, f Fault, document func(http.ResponseWriter, Fault)) {
	if f.Status != 0 {
		document(w, f)
		return
	}
	// net/http closes the connection without an answer; the in-process
	// client turns this into a transport error.
	panic(http.ErrAbortHandler)
}

// errDropped is what the in-process client returns for a dropped
// connection.
var errDropped = fmt.Errorf("fake aws: the connection was closed before the answer: %w", io.ErrUnexpectedEOF)
