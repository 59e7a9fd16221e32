package operator

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodewright/nodewright/internal/controller/disruption"
)

// ExplainNode reads a live cluster once into the model the controllers
// use and asks the disruption loop what it would do with the node now, and
// why (`nodewright explain node`). conf gives the instance types; the
// clock, logger and provider are set here.
func ExplainNode(ctx context.Context, restConfig *rest.Config, conf Config, name string) (disruption.Explanation, error) {
	scheme, err := Scheme()
	if err != nil {
		return disruption.Explanation{}, err
	}
	kube, err := client.New(restConfig, client.Options{Scheme: scheme})
	if err != nil {
		return disruption.Explanation{}, fmt.Errorf("connecting to the cluster: %w", err)
	}
	conf.CloudProvider, conf.KWOKServesEC2NodeClasses = "kwok", true
	conf.Clock, conf.Logger = clock.RealClock{}, logr.Discard()
	components, err := Build(conf, Dependencies{Kube: kube, Recorder: &record.FakeRecorder{}})
	if err != nil {
		return disruption.Explanation{}, err
	}
	if err := Sync(ctx, kube, scheme, components.Cluster); err != nil {
		return disruption.Explanation{}, fmt.Errorf("reading the cluster: %w", err)
	}
	return components.Disruption.Explain(ctx, name)
}
