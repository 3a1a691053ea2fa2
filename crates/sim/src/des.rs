//! The discrete-event core: a queue of events ordered by (time, sequence).
//!
//! Time is virtual nanoseconds. Two events at the same instant run in the order they were scheduled (the
//! sequence number breaks ties), which is what makes a run reproducible: nothing depends on heap layout,
//! hashing or the wall clock. The simulator pops the earliest event, advances `now` to it, and handles it;
//! handling may schedule more. There is no fixed tick: time jumps from event to event, so a shaper that wants
//! to be woken 1.234567 ms from now is woken exactly then (or at the next timer tick if the scenario asks for
//! a coarse `hz`, see `net`).

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use tclab_core::Nanos;

struct Entry<E> {
    at: Nanos,
    seq: u64,
    event: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Entry<E> {
    /// Reversed, so that the std max-heap pops the earliest (time, seq) first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

pub struct EventQueue<E> {
    heap: BinaryHeap<Entry<E>>,
    seq: u64,
    now: Nanos,
    /// Events handled so far, for the events-per-second figure.
    pub popped: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            seq: 0,
            now: 0,
            popped: 0,
        }
    }
}

impl<E> EventQueue<E> {
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// Schedule `event` at `at`; a time in the past is taken as now (events never run backwards).
    pub fn schedule(&mut self, at: Nanos, event: E) {
        let at = at.max(self.now);
        self.heap.push(Entry {
            at,
            seq: self.seq,
            event,
        });
        self.seq += 1;
    }

    /// The earliest event at or before `until`, advancing the clock to it.
    pub fn pop_until(&mut self, until: Nanos) -> Option<(Nanos, E)> {
        if self.heap.peek()?.at > until {
            return None;
        }
        let e = self.heap.pop()?;
        self.now = e.at;
        self.popped += 1;
        Some((e.at, e.event))
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_order_then_schedule_order() {
        let mut q = EventQueue::default();
        q.schedule(30, "c");
        q.schedule(10, "a");
        q.schedule(30, "d");
        q.schedule(10, "b");
        let order: Vec<_> = std::iter::from_fn(|| q.pop_until(u64::MAX)).collect();
        assert_eq!(order, vec![(10, "a"), (10, "b"), (30, "c"), (30, "d")]);
    }

    #[test]
    fn never_runs_backwards_and_stops_at_horizon() {
        let mut q = EventQueue::default();
        q.schedule(100, 1);
        q.schedule(200, 2);
        assert_eq!(q.pop_until(150), Some((100, 1)));
        q.schedule(50, 3); // in the past: runs at now = 100
        assert_eq!(q.pop_until(150), Some((100, 3)));
        assert_eq!(q.pop_until(150), None, "200 is past the horizon");
        assert_eq!(q.len(), 1);
    }
}
