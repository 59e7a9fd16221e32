package provisioning

import (
	"context"
	"errors"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// ResyncInterval is how often the simulator's loop looks again without a
// trigger; the live loop looks every lookInterval.
const ResyncInterval = 10 * time.Second

// lookInterval bounds how long the live loop goes without looking whether
// a pod became provisionable with no event (in memory: no API reads).
const lookInterval = time.Second

// Loop returns the provisioning runnable: wait for a batch window, decide,
// repeat. It also looks again (in memory, no LIST) every second and just
// after a pod becomes provisionable with no event to say so (a nomination
// lapsing: its planned place did not come through; a pod kube-scheduler
// has not reached in its grace), so such a pod waits no longer than that,
// nor do the pods that arrived while the cluster model was still syncing.
// It runs only on the leader.
func Loop(p *Provisioner, b *Batcher, clk clock.Clock, log logr.Logger) manager.Runnable {
	return manager.RunnableFunc(func(ctx context.Context) error {
		decided := make(chan struct{}, 1)
		go func() {
			for {
				// A pod that arrives while this waits can become
				// provisionable with no event (its grace ends): look at
				// least every lookInterval.
				wait := lookInterval
				if at, ok := p.cluster.NextProvisionable(); ok {
					// Just past it: at the expiry a nomination still holds.
					wait = min(wait, at.Sub(clk.Now())+time.Millisecond)
				}
				timer := clk.NewTimer(max(wait, 0))
				select {
				case <-ctx.Done():
					timer.Stop()
					return
				case <-decided: // new nominations: look at the times again
					timer.Stop()
					continue
				case <-timer.C():
					// An open window decides for every pod pending when it
					// closes: a trigger would only put its close off.
					if _, open := b.CloseAt(); !open && p.cluster.AnyProvisionable() {
						b.Trigger()
					}
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
			select {
			case decided <- struct{}{}:
			default:
			}
		}
		return nil
	})
}
