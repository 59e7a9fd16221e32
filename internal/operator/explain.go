package operator

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
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
	kube, scheme, err := liveClient(restConfig)
	if err != nil {
		return disruption.Explanation{}, err
	}
	components, err := liveComponents(ctx, kube, scheme, conf)
	if err != nil {
		return disruption.Explanation{}, err
	}
	return components.Disruption.Explain(ctx, name)
}

// liveClient is a direct (uncached) client of a live cluster.
func liveClient(restConfig *rest.Config) (client.Client, *runtime.Scheme, error) {
	scheme, err := Scheme()
	if err != nil {
		return nil, nil, err
	}
	kube, err := client.New(restConfig, client.Options{Scheme: scheme})
	if err != nil {
		return nil, nil, fmt.Errorf("connecting to the cluster: %w", err)
	}
	return kube, scheme, nil
}

// liveComponents builds the controllers for the explain commands (the
// kwok provider playing every NodeClass on conf's instance types, the real
// clock, no logs, no events) and reads the cluster once into their model.
func liveComponents(ctx context.Context, kube client.Client, scheme *runtime.Scheme, conf Config) (*Components, error) {
	conf.CloudProvider, conf.KWOKServesEC2NodeClasses = "kwok", true
	conf.Clock, conf.Logger = clock.RealClock{}, logr.Discard()
	components, err := Build(conf, Dependencies{Kube: kube, Recorder: &record.FakeRecorder{}})
	if err != nil {
		return nil, err
	}
	if err := Sync(ctx, kube, scheme, components.Cluster); err != nil {
		return nil, fmt.Errorf("reading the cluster: %w", err)
	}
	return components, nil
}
