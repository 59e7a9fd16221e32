package provisioning

import (
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
)

// EventDedupe is how long the same event on the same pod is not published
// again (Karpenter's recorder default): a pod planned again onto the same
// place, or still unplaceable for the same reason, in window after window
// is one event, not one a window (at 10,000 pods, 11,000 event writes).
const EventDedupe = 2 * time.Minute

// podEvents publishes pod events, each (pod, reason, message) at most once
// per EventDedupe.
type podEvents struct {
	recorder record.EventRecorder
	clock    clock.PassiveClock

	mu   sync.Mutex
	told map[podKey]told
}

// podKey names one pod for good (a pod made again under its name is
// another).
type podKey struct {
	namespace, name string
	uid             types.UID
}

type told struct {
	reason, message string
	at              time.Time
}

func newPodEvents(recorder record.EventRecorder, clk clock.PassiveClock) *podEvents {
	return &podEvents{recorder: recorder, clock: clk, told: map[podKey]told{}}
}

// Eventf publishes the event unless the pod had the same one within
// EventDedupe.
func (e *podEvents) Eventf(pod *corev1.Pod, eventType, reason, format string, args ...any) {
	message := fmt.Sprintf(format, args...)
	now := e.clock.Now()
	e.mu.Lock()
	k := podKey{pod.Namespace, pod.Name, pod.UID}
	last, ok := e.told[k]
	if ok && last.reason == reason && last.message == message && now.Sub(last.at) < EventDedupe {
		e.mu.Unlock()
		return
	}
	e.told[k] = told{reason: reason, message: message, at: now}
	if len(e.told) > 1024 && len(e.told)%1024 == 0 {
		e.forgetOld(now)
	}
	e.mu.Unlock()
	e.recorder.Event(pod, eventType, reason, message)
}

// forgetOld drops what is past the dedupe window; e.mu is held.
func (e *podEvents) forgetOld(now time.Time) {
	for k, t := range e.told {
		if now.Sub(t.at) >= EventDedupe {
			delete(e.told, k)
		}
	}
}
