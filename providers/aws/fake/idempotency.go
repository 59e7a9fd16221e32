package fake

import (
	"net/http"
	"net/url"
	"time"
)

// fleetReplay is what a CreateFleet with a client token asked and
// answered.
type fleetReplay struct {
	params string
	out    *createFleetResponse
}

// createFleet launches an instant fleet (launchFleet), idempotently as
// EC2 does: a call repeating an earlier call's ClientToken and parameters
// gets the earlier answer (the same fleet id and instances, launching
// nothing), one repeating the token with other parameters gets
// IdempotentParameterMismatch. Answers that launched nothing are replayed
// too, as EC2 replays any call that succeeded. Tokens do not expire.
func (s *Server) createFleet(q query) (any, *Fault) {
	token := q.get("ClientToken")
	params := withoutToken(q)
	if token != "" {
		if r, ok := s.fleets[token]; ok {
			if r.params != params {
				return nil, &Fault{Status: http.StatusBadRequest, Code: "IdempotentParameterMismatch",
					Message: "The client token " + token + " was used in an earlier request with other parameters."}
			}
			return r.out, nil
		}
	}
	out, fault := s.launchFleet(q)
	if fault != nil {
		return nil, fault
	}
	if token != "" {
		s.fleets[token] = fleetReplay{params: params, out: out}
	}
	return out, nil
}

// withoutToken is a call's parameters, ClientToken left out, in a
// canonical form.
func withoutToken(q query) string {
	v := url.Values{}
	for k, vs := range q {
		if k != "ClientToken" {
			v[k] = vs
		}
	}
	return v.Encode()
}

// SetDescribeLag sets how long instances launched from now on stay
// unknown to DescribeInstances (see Options.DescribeLag).
func (s *Server) SetDescribeLag(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.describeLag = d
}
