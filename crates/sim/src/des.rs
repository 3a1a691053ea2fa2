//! The discrete-event core: a queue of events ordered by time, then by the order they were scheduled in.
//!
//! Time is virtual nanoseconds. Two events at the same instant run in the order they were scheduled,
//! which is what makes a run reproducible: nothing depends on memory layout, hashing or the wall clock.
//! The simulator pops the earliest event, advances `now` to it, and handles it; handling may schedule more.
//! There is no fixed tick: time jumps from event to event, so a shaper that wants to be woken 1.234567 ms
//! from now is woken exactly then (or at the next timer tick if the scenario asks for a coarse `hz`, see
//! `net`).
//!
//! The queue is a hierarchical timing wheel, which a simulator may use because time never runs
//! backwards: no event is scheduled before the last one popped. Each level stands for a digit of the
//! time: levels 0 and 1 for bits 0–5 and 6–11 (64 slots each), level 2, the wide one, for bits 12–23
//! (4 096 slots of 4 µs), and levels of 64 slots above for six bits each. An event waits at the level
//! of the highest digit in which its time differs from `now`, in the slot of its own digit there
//! (level 0: the slot of its exact time). To pop, the lowest non-empty level's lowest slot holds the
//! earliest events; a slot of level 0 is one instant, popped in place, and a slot above is emptied into
//! the lower levels once `now` has moved to its earliest time, except its first event at that time,
//! which is handed out at once (dealt out, it would have headed its instant's slot and been popped
//! next). An event moves down at most once a level, and only the events within one slot's span move
//! together, where a radix heap by bits (the previous queue) moved every event of a power-of-two range
//! each time its earliest one was due. The wide level takes a frame's arrival a link's delay ahead
//! (1–5 ms in bench-isp) and a TX completion at 1 Gbit/s (12 µs) straight into a slot of 4 µs, where
//! levels of 64 slots dealt the arrival out twice; finding its lowest slot takes two steps (a summary
//! word, then the slot's word), paid only at that level: a pop, a push and a look ahead branch once on
//! the level, and the narrow levels' steps are as they were. Events at one instant leave in the
//! order they were scheduled, with no sequence number: every slot is a FIFO in scheduling order,
//! because a slot emptied into the levels below finds them empty (it was the lowest) and deals its
//! events out in its own order, and an event scheduled afterwards joins a slot's tail, after all of
//! them. So the order is exactly the (time, order of scheduling) order a binary heap with a sequence
//! number gives. Every level of 256 slots (four occupancy words and a summary word) moved fewer events
//! but cost more than it saved in finding a level's lowest slot (BENCHMARKS.md, issue 26).

use tclab_core::Nanos;

/// Slots of a narrow level, and the bits of the time they stand for.
const DIGIT: u32 = 6;
const SLOTS: usize = 1 << DIGIT;
/// The wide level: 4 096 slots of 2^12 ns (4 µs), for events 2^12–2^24 ns (4 µs–16.7 ms) ahead.
const WIDE: usize = 2;
const WIDE_SLOTS: usize = 1 << 12;
/// Levels 0 and 1 (bits 0–11), the wide level (12–23), then 64 slots a level up to bit 63.
const LEVELS: usize = 3 + (64 - 24usize).div_ceil(DIGIT as usize);
/// The lowest bit of each level's digit.
const SHIFT: [u32; LEVELS] = {
    let mut s = [0; LEVELS];
    let mut l = 0;
    while l < LEVELS {
        s[l] = if l <= WIDE {
            l as u32 * DIGIT
        } else {
            6 + l as u32 * DIGIT
        };
        l += 1;
    }
    s
};
/// The level of an event whose time's highest bit differing from `now` is bit `b`.
const LEVEL_OF_BIT: [u8; 64] = {
    let mut t = [0; 64];
    let mut b = 0;
    while b < 64 {
        t[b] = if b < 12 {
            (b / 6) as u8
        } else if b < 24 {
            WIDE as u8
        } else {
            (3 + (b - 24) / 6) as u8
        };
        b += 1;
    }
    t
};
/// The end of a slot's list.
const NIL: u32 = u32::MAX;

/// An event, linked to the next of its slot. All live in one array, reused last freed first (the
/// slots' lists, not one buffer per slot, so that the queue's memory stays small and warm).
struct Node<E> {
    at: Nanos,
    next: u32,
    event: E,
}

/// An occupied slot's earliest time, and its first and last events (together: one cache line to miss).
#[derive(Clone, Copy)]
struct Slot {
    earliest: Nanos,
    head: u32,
    tail: u32,
}

const EMPTY: Slot = Slot {
    earliest: 0,
    head: NIL,
    tail: NIL,
};

/// A narrow level: 64 slots, one occupancy word.
struct Level {
    /// Bit `s` set when slot `s` holds events.
    occupied: u64,
    slots: [Slot; SLOTS],
}

/// A level's occupancy. Slot numbers are masked to the level's size, which costs an `and` where the
/// compiler would otherwise test them against it (`trailing_zeros` of an empty word is 64).
impl Level {
    /// The lowest slot holding events; the level must hold some.
    #[inline(always)]
    fn lowest(&self) -> usize {
        self.occupied.trailing_zeros() as usize & (SLOTS - 1)
    }

    /// The lowest slot above `s` holding events.
    #[inline(always)]
    fn after(&self, s: usize) -> Option<usize> {
        let later = self.occupied & (!1u64 << s);
        (later != 0).then(|| later.trailing_zeros() as usize & (SLOTS - 1))
    }

    /// Mark slot `s` as holding events; whether it held none before.
    #[inline(always)]
    fn mark(&mut self, s: usize) -> bool {
        let (was, bit) = (self.occupied, 1u64 << s);
        self.occupied = was | bit;
        was & bit == 0
    }

    /// Mark slot `s` as empty; whether the level is empty now.
    #[inline(always)]
    fn unmark(&mut self, s: usize) -> bool {
        self.occupied &= !(1u64 << s);
        self.occupied == 0
    }
}

/// The wide level: 4 096 slots, 64 occupancy words and a summary word whose bit `w` is set when word
/// `w` is not zero.
struct Wide {
    summary: u64,
    occupied: [u64; WIDE_SLOTS / 64],
    slots: [Slot; WIDE_SLOTS],
}

/// As [`Level`]'s, in two steps: the summary's lowest word, then that word's lowest bit.
impl Wide {
    #[inline(always)]
    fn lowest(&self) -> usize {
        self.lowest_in(self.summary.trailing_zeros() as usize & 63)
    }

    /// The lowest slot of occupancy word `w`, which must hold some.
    #[inline(always)]
    fn lowest_in(&self, w: usize) -> usize {
        (w << 6) | (self.occupied[w].trailing_zeros() as usize & 63)
    }

    #[inline(always)]
    fn after(&self, s: usize) -> Option<usize> {
        let w = (s >> 6) & 63;
        let later = self.occupied[w] & (!1u64 << (s & 63));
        if later != 0 {
            return Some((w << 6) | (later.trailing_zeros() as usize & 63));
        }
        let words = self.summary & (!1u64 << w);
        (words != 0).then(|| self.lowest_in(words.trailing_zeros() as usize & 63))
    }

    #[inline(always)]
    fn mark(&mut self, s: usize) -> bool {
        let (w, bit) = ((s >> 6) & 63, 1u64 << (s & 63));
        let was = self.occupied[w];
        self.occupied[w] = was | bit;
        self.summary |= 1 << w;
        was & bit == 0
    }

    #[inline(always)]
    fn unmark(&mut self, s: usize) -> bool {
        let w = (s >> 6) & 63;
        self.occupied[w] &= !(1u64 << (s & 63));
        if self.occupied[w] == 0 {
            self.summary &= !(1u64 << w);
        }
        self.summary == 0
    }
}

pub struct EventQueue<E> {
    /// The narrow levels, by level number (entry `WIDE` unused).
    levels: [Level; LEVELS],
    wide: Box<Wide>,
    /// Bit `l` set when level `l` holds events.
    nonempty: u32,
    nodes: Vec<Node<E>>,
    /// The free nodes' list.
    free: u32,
    len: usize,
    now: Nanos,
    /// Events handled so far, for the events-per-second figure.
    pub popped: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            levels: std::array::from_fn(|_| Level {
                occupied: 0,
                slots: [EMPTY; SLOTS],
            }),
            wide: Box::new(Wide {
                summary: 0,
                occupied: [0; WIDE_SLOTS / 64],
                slots: [EMPTY; WIDE_SLOTS],
            }),
            nonempty: 0,
            nodes: Vec::new(),
            free: NIL,
            len: 0,
            now: 0,
            popped: 0,
        }
    }
}

/// A level's occupancy and slots by level number: the wide level's or a narrow one's.
impl<E> EventQueue<E> {
    #[inline(always)]
    fn lowest(&self, l: usize) -> usize {
        if l == WIDE {
            self.wide.lowest()
        } else {
            self.levels[l].lowest()
        }
    }

    #[inline(always)]
    fn slot(&self, l: usize, s: usize) -> &Slot {
        if l == WIDE {
            &self.wide.slots[s & (WIDE_SLOTS - 1)]
        } else {
            &self.levels[l].slots[s & (SLOTS - 1)]
        }
    }

    /// Mark slot `s` of level `l` as empty, and the level too if that was its last.
    #[inline(always)]
    fn unmark(&mut self, l: usize, s: usize) {
        let empty = if l == WIDE {
            self.wide.unmark(s)
        } else {
            self.levels[l].unmark(s)
        };
        if empty {
            self.nonempty &= !(1 << l);
        }
    }
}

impl<E: Copy> EventQueue<E> {
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// Schedule `event` at `at`; a time in the past is taken as now (events never run backwards).
    /// Inlined into its few callers (a wire's two events a frame, a qdisc's wake-up, an application's
    /// timer): a call's entry and exit were a sixth of its instructions.
    #[inline(always)]
    pub fn schedule(&mut self, at: Nanos, event: E) {
        let at = at.max(self.now);
        let node = Node {
            at,
            next: NIL,
            event,
        };
        let i = if self.free != NIL {
            let i = self.free;
            self.free = self.nodes[i as usize].next;
            self.nodes[i as usize] = node;
            i
        } else {
            self.nodes.push(node);
            (self.nodes.len() - 1) as u32
        };
        self.len += 1;
        self.push(i, at);
    }

    /// Append node `i` (its time `at`, not before `now`; its `next` NIL) to its slot relative to `now`.
    #[inline]
    fn push(&mut self, i: u32, at: Nanos) {
        // The highest differing bit's level; bit 0 set so that an event at `now` is of level 0.
        let level =
            LEVEL_OF_BIT[(63 - ((at ^ self.now) | 1).leading_zeros()) as usize & 63] as usize;
        let s = (at >> SHIFT[level]) as usize;
        let (first, slot) = if level != WIDE {
            let lv = &mut self.levels[level];
            let s = s & (SLOTS - 1);
            (lv.mark(s), &mut lv.slots[s])
        } else {
            let s = s & (WIDE_SLOTS - 1);
            (self.wide.mark(s), &mut self.wide.slots[s])
        };
        if first {
            *slot = Slot {
                earliest: at,
                head: i,
                tail: i,
            };
            self.nonempty |= 1 << level;
        } else {
            self.nodes[slot.tail as usize].next = i;
            slot.tail = i;
            slot.earliest = slot.earliest.min(at);
        }
    }

    /// The earliest event at or before `until`, advancing the clock to it. Inlined into the event loop,
    /// with the rare step (a slot dealt out below) out of line.
    #[inline]
    pub fn pop_until(&mut self, until: Nanos) -> Option<(Nanos, E)> {
        if self.nonempty == 0 {
            return None;
        }
        // The lowest level holds the earliest events: they agree with `now` above its digit, where
        // an event of a higher level differs from it there (and is later). Within the level, the
        // lowest slot: every slot's digit is at least `now`'s.
        let l = self.nonempty.trailing_zeros() as usize;
        if l == WIDE {
            return self.pop_wide(until);
        }
        let lv = &mut self.levels[l];
        let s = lv.lowest();
        let at = if l == 0 {
            (self.now & !(SLOTS as Nanos - 1)) | s as Nanos
        } else {
            lv.slots[s].earliest
        };
        if at > until {
            return None;
        }
        let first = lv.slots[s].head;
        let next = self.nodes[first as usize].next;
        let taken = if l == 0 || next == NIL {
            // An instant of level 0, or the one event of a higher slot (nearly every pop of a
            // simulation is one of these): it leaves from where it is.
            if next == NIL && lv.unmark(s) {
                self.nonempty &= !(1 << l);
            }
            lv.slots[s].head = next;
            first
        } else {
            self.deal_out(l, s, at)
        };
        Some(self.take(taken, at))
    }

    /// `pop_until` at the wide level (its lowest slot found in two steps), not an instant.
    #[inline]
    fn pop_wide(&mut self, until: Nanos) -> Option<(Nanos, E)> {
        let s = self.wide.lowest();
        let slot = self.wide.slots[s & (WIDE_SLOTS - 1)];
        if slot.earliest > until {
            return None;
        }
        let (at, first) = (slot.earliest, slot.head);
        let next = self.nodes[first as usize].next;
        let taken = if next == NIL {
            self.unmark(WIDE, s);
            first
        } else {
            self.deal_out(WIDE, s, at)
        };
        Some(self.take(taken, at))
    }

    /// Free node `taken`, popped at `at`, and give its event.
    #[inline(always)]
    fn take(&mut self, taken: u32, at: Nanos) -> (Nanos, E) {
        let node = &mut self.nodes[taken as usize];
        let event = node.event;
        node.next = self.free;
        self.free = taken;
        self.now = at;
        self.len -= 1;
        self.popped += 1;
        (at, event)
    }

    /// The next two events `pop_until` hands out unless one is scheduled before them, when that costs
    /// a look at the lowest slots. The first: known when its slot is an instant of level 0 or a higher
    /// slot holding it alone (a higher slot of several has its earliest found only by dealing it out).
    /// The second, under the same terms: the first's instant's next event, else the first's level's
    /// next slot or the next level's lowest. For the event loop to prefetch what the next events read;
    /// changes nothing. The two together, so that the lowest slot is found once.
    #[inline]
    pub fn peek_two(&self) -> (Option<E>, Option<E>) {
        let Some(l) = self.lowest_level(0) else {
            return (None, None);
        };
        if l == WIDE {
            return self.peek_two_wide();
        }
        let lv = &self.levels[l];
        let s = lv.lowest();
        let slot = &lv.slots[s];
        let first = self.nodes[slot.head as usize].event;
        if slot.head != slot.tail {
            // An instant's first two events; a higher slot's order is known only once dealt out.
            return match l {
                0 => {
                    let next = self.nodes[slot.head as usize].next;
                    (Some(first), Some(self.nodes[next as usize].event))
                }
                _ => (None, None),
            };
        }
        let second = match lv.after(s) {
            Some(later) => self.alone(l, later),
            None => (self.lowest_level(l + 1)).and_then(|l2| self.alone(l2, self.lowest(l2))),
        };
        (Some(first), second)
    }

    /// `peek_two` when the wide level is the lowest.
    #[inline]
    fn peek_two_wide(&self) -> (Option<E>, Option<E>) {
        let s = self.wide.lowest();
        let slot = &self.wide.slots[s & (WIDE_SLOTS - 1)];
        if slot.head != slot.tail {
            return (None, None);
        }
        let first = self.nodes[slot.head as usize].event;
        let second = match self.wide.after(s) {
            Some(later) => self.alone(WIDE, later),
            None => (self.lowest_level(WIDE + 1)).and_then(|l2| self.alone(l2, self.lowest(l2))),
        };
        (Some(first), second)
    }

    /// The lowest level from `from` up that holds events.
    #[inline]
    fn lowest_level(&self, from: usize) -> Option<usize> {
        let levels = self.nonempty & (u32::MAX << from);
        (levels != 0).then(|| levels.trailing_zeros() as usize)
    }

    /// The first event of slot `s` of level `l` if it is the slot's earliest one without dealing the
    /// slot out: an instant of level 0, or a higher slot holding it alone.
    #[inline]
    fn alone(&self, l: usize, s: usize) -> Option<E> {
        let slot = self.slot(l, s);
        (l == 0 || slot.head == slot.tail).then(|| self.nodes[slot.head as usize].event)
    }

    /// Empty slot `s` of level `l` (above 0, holding several events, the earliest at `at`) into the
    /// levels below, all but its first event at `at`, which is the earliest of the queue and is
    /// returned, unlinked, for the pop: dealt out, it would only have been popped from level 0 next.
    /// Out of line, so that the pops that need no dealing (nine in ten in bench-htb) save and restore
    /// none of its registers.
    #[inline(never)]
    fn deal_out(&mut self, l: usize, s: usize, at: Nanos) -> u32 {
        // Relative to the slot's earliest time, which becomes `now`: it agrees with the old `now` on
        // every digit above this level, so no other event changes place.
        let mut i = self.slot(l, s).head;
        self.unmark(l, s);
        self.now = at;
        let taken = loop {
            let node = &mut self.nodes[i as usize];
            let (this, t) = (i, node.at);
            i = std::mem::replace(&mut node.next, NIL);
            if t == at {
                break this;
            }
            self.push(this, t);
        };
        while i != NIL {
            let node = &mut self.nodes[i as usize];
            let (next, t) = (std::mem::replace(&mut node.next, NIL), node.at);
            self.push(i, t);
            i = next;
        }
        taken
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

    /// A slot above level 0 holding several events hands its first event at its earliest time
    /// straight to the pop and deals the rest out; the order must be as if all had been dealt out.
    /// 200, 210 and 220 share a level-1 slot (192..256) while `now` is 0; two events at 200, the
    /// earliest, not first in the slot's list. One scheduled at 200 after the first pop joins the
    /// instant's tail, behind the 200 scheduled before it (the essay's FIFO argument).
    #[test]
    fn a_dealt_slot_hands_out_its_first_earliest_event() {
        let mut q = EventQueue::default();
        q.schedule(220, "x");
        q.schedule(200, "a");
        q.schedule(210, "c");
        q.schedule(200, "b");
        assert_eq!(q.pop_until(u64::MAX), Some((200, "a")));
        q.schedule(200, "d");
        let order: Vec<_> = std::iter::from_fn(|| q.pop_until(u64::MAX)).collect();
        assert_eq!(order, vec![(200, "b"), (200, "d"), (210, "c"), (220, "x")]);
    }

    /// The wide level's 4 096 slots span 64 occupancy words: with `now` 0, slots 63, 64 and 4 095
    /// (words 0, 1 and 63) pop in time order, and `peek_two` finds the next word's slot; a slot
    /// of 4 µs holding two events deals them out in time order, not scheduling order.
    #[test]
    fn the_wide_level_across_its_words() {
        const S: u64 = 1 << 12;
        let mut q = EventQueue::default();
        q.schedule(4095 * S + 5, "last");
        q.schedule(64 * S + 7, "b");
        q.schedule(63 * S + 100, "a");
        assert_eq!(q.peek_two(), (Some("a"), Some("b")));
        assert_eq!(q.pop_until(u64::MAX), Some((63 * S + 100, "a")));
        assert_eq!(q.peek_two(), (Some("b"), Some("last")));
        q.schedule(70 * S + 9, "d");
        q.schedule(70 * S + 2, "c");
        let order: Vec<_> = std::iter::from_fn(|| q.pop_until(u64::MAX)).collect();
        let want = [
            (64 * S + 7, "b"),
            (70 * S + 2, "c"),
            (70 * S + 9, "d"),
            (4095 * S + 5, "last"),
        ];
        assert_eq!(order, want);
    }

    /// The wheel against the order it must reproduce, (time, sequence) sorted, on schedules and pops
    /// interleaved as a simulation makes them: many events at `now` and at equal later times, near and
    /// far ones (up to 2^40 ns ahead, and many within the wide level's 2^24), many at the same
    /// instants of a coarse grid (so that a slot of a higher level holds ties when it is dealt out),
    /// horizons that stop short of the next event.
    #[test]
    fn same_order_as_sorting_by_time_then_sequence() {
        let mut rng = crate::rng::Rng::stream(26, "des");
        let mut q = EventQueue::default();
        let mut reference = std::collections::BTreeSet::new(); // (at, seq)
        let mut seq = 0u64;
        let mut popped = 0;
        let mut peeked = 0;
        let mut peeked_second = 0;
        for _ in 0..200_000 {
            if rng.below(100) < 55 {
                let now = q.now();
                let at = match rng.below(8) {
                    0 => now,
                    1 => now + rng.below(4),
                    2 => now + rng.below(1000),
                    3 => now + rng.below(1 << 20),
                    4 => now.saturating_sub(rng.below(10)), // the past: taken as now
                    5 => (now / 5000 + 1 + rng.below(100)) * 5000,
                    6 => now + rng.below(1 << 24), // the wide level's span
                    _ => now + rng.below(1 << 40),
                };
                q.schedule(at, seq);
                reference.insert((at.max(now), seq));
                seq += 1;
            } else {
                // What `peek_two` names, when it names one, is what unbounded pops would hand out.
                let (next, second) = q.peek_two();
                if let Some(e) = next {
                    assert_eq!(Some(e), reference.first().map(|&(_, seq)| seq), "peek");
                    peeked += 1;
                }
                if let Some(e) = second {
                    assert_eq!(
                        Some(e),
                        reference.iter().nth(1).map(|&(_, seq)| seq),
                        "peek_second"
                    );
                    peeked_second += 1;
                }
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
        assert!(peeked > 50_000, "the test peeks often: {peeked}");
        assert!(peeked_second > 20_000, "and at the second: {peeked_second}");
        while let Some(want) = reference.pop_first() {
            assert_eq!(q.pop_until(u64::MAX), Some(want));
        }
        assert!(q.is_empty() && q.pop_until(u64::MAX).is_none());
    }
}
