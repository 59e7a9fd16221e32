package metrics

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodewright/nodewright/internal/state"
	cpmetrics "github.com/nodewright/nodewright/pkg/cloudprovider/metrics"
)

// recorder is a Registerer that keeps what is registered.
type recorder struct{ collectors []prometheus.Collector }

func (r *recorder) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return nil
}
func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	r.collectors = append(r.collectors, cs...)
}
func (r *recorder) Unregister(prometheus.Collector) bool { return true }

var fqName = regexp.MustCompile(`fqName: "([a-z_]+)"`)

// allNames are every series name Nodewright exports.
func allNames(t *testing.T) []string {
	t.Helper()
	r := &recorder{}
	if _, err := New(r, "v", "c"); err != nil {
		t.Fatal(err)
	}
	if _, err := cpmetrics.New(r); err != nil {
		t.Fatal(err)
	}
	r.collectors = append(r.collectors, NewClusterCollector(state.NewCluster(clocktesting.NewFakeClock(time.Time{})), clocktesting.NewFakeClock(time.Time{}), nil))
	ch := make(chan *prometheus.Desc, 1000)
	for _, c := range r.collectors {
		c.Describe(ch)
	}
	close(ch)
	var names []string
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil && !slices.Contains(names, m[1]) {
			names = append(names, m[1])
		}
	}
	slices.Sort(names)
	return names
}

// docs/metrics.md names every series.
func TestMetricsReferenceCoversEverySeries(t *testing.T) {
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	names := allNames(t)
	if len(names) < 30 {
		t.Fatalf("only %d series found: %v", len(names), names)
	}
	for _, n := range names {
		if !strings.Contains(string(doc), "`"+n+"`") {
			t.Errorf("docs/metrics.md does not describe %s", n)
		}
	}
}
