package simulator

import (
	"container/heap"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// work is one reconcile of one controller.
type work struct {
	controller int
	req        reconcile.Request
}

// workQueue is a FIFO that holds each item once, like controller-runtime's
// workqueue: an item enqueued again while waiting is not doubled.
type workQueue struct {
	items  []work
	queued map[work]bool
}

func (q *workQueue) add(w work) {
	if q.queued == nil {
		q.queued = map[work]bool{}
	}
	if q.queued[w] {
		return
	}
	q.queued[w] = true
	q.items = append(q.items, w)
}

func (q *workQueue) pop() (work, bool) {
	if len(q.items) == 0 {
		return work{}, false
	}
	w := q.items[0]
	q.items = q.items[1:]
	delete(q.queued, w)
	return w, true
}

func (q *workQueue) len() int { return len(q.items) }

// timer is something due at a virtual time: a reconcile to requeue, or an
// action (a scenario step, a job finishing).
type timer struct {
	at     time.Time
	seq    int // ties keep insertion order, for determinism
	work   *work
	action func() error
}

// timers holds each reconcile at most once, like the delaying queue of
// controller-runtime's workqueue: a requeue asked for while one is waiting
// keeps the earlier time. Without that, every event on an object that asks
// to be looked at again later would add a timer of its own.
type timers struct {
	items []timer
	seq   int
	// waiting is the due time of each reconcile held.
	waiting map[work]time.Time
}

func (t *timers) Len() int { return len(t.items) }
func (t *timers) Less(i, j int) bool {
	if !t.items[i].at.Equal(t.items[j].at) {
		return t.items[i].at.Before(t.items[j].at)
	}
	return t.items[i].seq < t.items[j].seq
}
func (t *timers) Swap(i, j int) { t.items[i], t.items[j] = t.items[j], t.items[i] }
func (t *timers) Push(x any)    { t.items = append(t.items, x.(timer)) }
func (t *timers) Pop() any {
	last := t.items[len(t.items)-1]
	t.items = t.items[:len(t.items)-1]
	return last
}

func (t *timers) add(at time.Time, w *work, action func() error) {
	if w != nil {
		if t.waiting == nil {
			t.waiting = map[work]time.Time{}
		}
		if was, ok := t.waiting[*w]; ok && !at.Before(was) {
			return
		}
		// An earlier time replaces the later one: the later entry stays in
		// the heap and is dropped when it comes due (see due).
		t.waiting[*w] = at
	}
	t.seq++
	heap.Push(t, timer{at: at, seq: t.seq, work: w, action: action})
}

// next is the earliest due time, if any.
func (t *timers) next() (time.Time, bool) {
	if len(t.items) == 0 {
		return time.Time{}, false
	}
	return t.items[0].at, true
}

// due removes and returns the timers due at or before now, in order.
func (t *timers) due(now time.Time) []timer {
	var out []timer
	for len(t.items) > 0 && !t.items[0].at.After(now) {
		next := heap.Pop(t).(timer)
		if next.work != nil {
			if at, ok := t.waiting[*next.work]; !ok || !at.Equal(next.at) {
				continue // replaced by an earlier time, already delivered
			}
			delete(t.waiting, *next.work)
		}
		out = append(out, next)
	}
	return out
}
