package provisioning

import (
	"context"
	"errors"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// ResyncInterval is how often the loop looks again without a trigger.
const ResyncInterval = 10 * time.Second

// Loop returns the provisioning runnable: wait for a batch window, decide,
// repeat. Every resync it also looks again (in memory, no LIST), so pods
// whose nomination lapsed are not forgotten, nor the pods that arrived
// while the cluster model was still syncing. It runs only on the leader.
func Loop(p *Provisioner, b *Batcher, clk clock.Clock, log logr.Logger) manager.Runnable {
	return manager.RunnableFunc(func(ctx context.Context) error {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-clk.After(ResyncInterval):
					b.Trigger()
				}
			}
		}()
		for b.Wait(ctx) {
			created, err := p.Provision(ctx)
			switch {
			case errors.Is(err, ErrNotSynced):
				log.Info("waiting for the cluster model to sync before provisioning")
			case err != nil:
				log.Error(err, "provisioning")
			}
			if len(created) > 0 {
				log.Info("created nodeclaims", "count", len(created))
			}
		}
		return nil
	})
}
