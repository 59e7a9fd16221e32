package aws

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

// Client tokens are EC2's kind (at most 64 printable ASCII characters),
// one sequence per NodeClaim, moving on only after a fleet launched
// nothing.
func TestClientTokens(t *testing.T) {
	clk := clocktesting.NewFakeClock(metav1.Now().Time)
	p, err := New(nil, nil, Options{ClusterName: "demo", Clock: clk, OnDemandPrices: map[string]float64{}})
	if err != nil {
		t.Fatal(err)
	}
	claim := func(name, uid string) *karpv1.NodeClaim {
		return &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid)}}
	}
	for _, tc := range []struct {
		name string
		nc   *karpv1.NodeClaim
		want string
	}{
		{"a UID", claim("web-1", "0f4c2c43-5b9e-4b8e-9d7e-2f5a3c1b7e21"), "nodewright-0f4c2c43-5b9e-4b8e-9d7e-2f5a3c1b7e21-0"},
		{"a long UID", claim("web-1", strings.Repeat("u", 100)), ""},
		{"no UID", claim("web-1", ""), ""},
		{"no UID, a long name", claim(strings.Repeat("n", 200), ""), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			token := p.clientToken(tc.nc)
			if len(token) > maxClientToken || !isASCII(token) || !strings.HasPrefix(token, "nodewright-") {
				t.Errorf("token %q: want at most %d printable ASCII characters", token, maxClientToken)
			}
			if tc.want != "" && token != tc.want {
				t.Errorf("token %q, want %q", token, tc.want)
			}
		})
	}
	a, b := claim("web-1", "uid-a"), claim("web-1", "uid-b")
	if p.clientToken(a) == p.clientToken(b) {
		t.Error("two NodeClaims of the same name (different UIDs) share a token")
	}
	first := p.clientToken(a)
	p.launchedNothing(a)
	second := p.clientToken(a)
	if second == first || p.clientToken(b) != "nodewright-uid-b-0" {
		t.Errorf("after a fleet launched nothing: %q then %q; the other claim's %q", first, second, p.clientToken(b))
	}
	p.launchSettled(a)
	if p.clientToken(a) != first {
		t.Errorf("after the launch settled: %q, want the sequence restarted at %q", p.clientToken(a), first)
	}
}
