//! The discrete-event core: a queue of events ordered by (time, sequence).
//!
//! Time is virtual nanoseconds. Two events at the same instant run in the order they were scheduled (the
//! sequence number breaks ties), which is what makes a run reproducible: nothing depends on memory layout,
//! hashing or the wall clock. The simulator pops the earliest event, advances `now` to it, and handles it;
//! handling may schedule more. There is no fixed tick: time jumps from event to event, so a shaper that wants
//! to be woken 1.234567 ms from now is woken exactly then (or at the next timer tick if the scenario asks for
//! a coarse `hz`, see `net`).
//!
//! The queue is a radix heap (Ahuja, Mehlhorn, Orlin and Tarjan, 1990), which a simulator may use because
//! time never runs backwards: no event is scheduled before the last one popped. An event waits in the
//! bucket named by the highest bit in which its time differs from `now` (bucket 0: equal to `now`). To pop,
//! the lowest non-empty bucket's earliest time becomes `now` and its events move to lower buckets, each at
//! most once per bit, so most events are touched a few times, against a binary heap's log₂ n sift over
//! cache lines all over the heap. Events at one instant leave in the order they were scheduled: bucket 0
//! is a FIFO, sorted by sequence number when a redistribution fills it (the only time it receives events
//! from elsewhere, and then it is empty), so the order is exactly the (time, sequence) order a binary heap
//! gives.

use std::collections::VecDeque;
use tclab_core::Nanos;

struct Entry<E> {
    at: Nanos,
    seq: u64,
    event: E,
}

pub struct EventQueue<E> {
    /// Events at `now`, in the order they were scheduled.
    current: VecDeque<Entry<E>>,
    /// `buckets[b]`: events whose time differs from `now` first in bit `b` (from the top), unordered.
    buckets: [Vec<Entry<E>>; 64],
    /// Bit `b` set when `buckets[b]` is not empty.
    full: u64,
    /// Each non-empty bucket's earliest time and the position of its first event at that time, kept as
    /// events are added, so that a pop finds its event without scanning the bucket; and bit `b` set when
    /// another event of `buckets[b]` shares that time.
    first: [(Nanos, u32); 64],
    tied: u64,
    /// An empty vector with capacity, swapped with a bucket that is being redistributed.
    spare: Vec<Entry<E>>,
    len: usize,
    seq: u64,
    now: Nanos,
    /// Events handled so far, for the events-per-second figure.
    pub popped: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            current: VecDeque::new(),
            buckets: std::array::from_fn(|_| Vec::new()),
            full: 0,
            first: [(0, 0); 64],
            tied: 0,
            spare: Vec::new(),
            len: 0,
            seq: 0,
            now: 0,
            popped: 0,
        }
    }
}

/// The bucket of an event at `at` when the clock reads `now` (`at` > `now`).
fn bucket(at: Nanos, now: Nanos) -> usize {
    63 - (at ^ now).leading_zeros() as usize
}

impl<E> EventQueue<E> {
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// Schedule `event` at `at`; a time in the past is taken as now (events never run backwards).
    pub fn schedule(&mut self, at: Nanos, event: E) {
        let e = Entry {
            at: at.max(self.now),
            seq: self.seq,
            event,
        };
        self.seq += 1;
        self.len += 1;
        if e.at == self.now {
            self.current.push_back(e);
        } else {
            self.push(bucket(e.at, self.now), e);
        }
    }

    /// Add `e` to bucket `b`, keeping the bucket's earliest time.
    #[inline]
    fn push(&mut self, b: usize, e: Entry<E>) {
        let bit = 1u64 << b;
        let events = &mut self.buckets[b];
        if self.full & bit == 0 || e.at < self.first[b].0 {
            self.first[b] = (e.at, events.len() as u32);
            self.tied &= !bit;
        } else if e.at == self.first[b].0 {
            self.tied |= bit;
        }
        events.push(e);
        self.full |= bit;
    }

    /// The earliest event at or before `until`, advancing the clock to it.
    pub fn pop_until(&mut self, until: Nanos) -> Option<(Nanos, E)> {
        if self.current.is_empty() {
            if self.full == 0 {
                return None;
            }
            // The lowest non-empty bucket holds the earliest events: they agree with `now` above bit b and
            // have it set, where an event of a higher bucket b' has bit b' set and `now` has it clear.
            let b = self.full.trailing_zeros() as usize;
            let (at, first) = self.first[b];
            if at > until {
                return None;
            }
            self.now = at;
            self.len -= 1;
            self.popped += 1;
            if self.tied & (1 << b) == 0 {
                // The one event at that instant, most often alone in its bucket too: it leaves at once,
                // without a pass through `current` (nearly every pop of a simulation is this one).
                let events = &mut self.buckets[b];
                let e = events.swap_remove(first as usize);
                if events.is_empty() {
                    self.full &= !(1 << b);
                } else {
                    self.redistribute(b);
                }
                return Some((e.at, e.event));
            }
            self.redistribute(b);
            self.current
                .make_contiguous()
                .sort_unstable_by_key(|e| e.seq);
            let e = self.current.pop_front()?;
            return Some((e.at, e.event));
        } else if self.now > until {
            return None;
        }
        let e = self.current.pop_front()?;
        self.len -= 1;
        self.popped += 1;
        Some((e.at, e.event))
    }

    /// Empty bucket `b` into `current` (its events at `now`) and the lower buckets, after `now` moved to
    /// its earliest time.
    fn redistribute(&mut self, b: usize) {
        let now = self.now;
        std::mem::swap(&mut self.buckets[b], &mut self.spare);
        self.full &= !(1 << b);
        let mut spare = std::mem::take(&mut self.spare);
        for e in spare.drain(..) {
            if e.at == now {
                self.current.push_back(e);
            } else {
                // Below b: the event agreed with the old `now` above bit b, and so does the new one.
                self.push(bucket(e.at, now), e);
            }
        }
        self.spare = spare;
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
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

    /// The radix heap against the order it must reproduce, (time, sequence) sorted, on schedules and pops
    /// interleaved as a simulation makes them: many events at `now` and at equal later times, near and
    /// far ones (up to 2^40 ns ahead), horizons that stop short of the next event.
    #[test]
    fn same_order_as_sorting_by_time_then_sequence() {
        let mut rng = crate::rng::Rng::stream(26, "des");
        let mut q = EventQueue::default();
        let mut reference = std::collections::BTreeSet::new(); // (at, seq)
        let mut seq = 0u64;
        let mut popped = 0;
        for _ in 0..200_000 {
            if rng.below(100) < 55 {
                let now = q.now();
                let at = match rng.below(6) {
                    0 => now,
                    1 => now + rng.below(4),
                    2 => now + rng.below(1000),
                    3 => now + rng.below(1 << 20),
                    4 => now.saturating_sub(rng.below(10)), // the past: taken as now
                    _ => now + rng.below(1 << 40),
                };
                q.schedule(at, seq);
                reference.insert((at.max(now), seq));
                seq += 1;
            } else {
                let until = q.now() + rng.below(1 << 22);
                let want = reference.first().copied().filter(|&(at, _)| at <= until);
                let got = q.pop_until(until);
                assert_eq!(got, want, "pop until {until}");
                if want.is_some() {
                    reference.pop_first();
                    popped += 1;
                }
            }
            assert_eq!(q.len(), reference.len());
        }
        assert!(popped > 50_000, "the test pops often: {popped}");
        while let Some(want) = reference.pop_first() {
            assert_eq!(q.pop_until(u64::MAX), Some(want));
        }
        assert!(q.is_empty() && q.pop_until(u64::MAX).is_none());
    }
}
