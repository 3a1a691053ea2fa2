//! Many FIFO lists of packets over one slab: the kernel's per-flow skb lists (`flow->head`, `flow->tail`,
//! `skb->next`), for the disciplines that keep thousands of flows.
//!
//! A `VecDeque` per flow gives each flow its own allocation, with its packets inline: with 65 536 flows
//! the step that serves one flow and the step that queues to another each land in a cold allocation, and
//! the flow table is large because every entry carries a deque. Here a qdisc's queued packets all sit in
//! one `Vec` of slots, each a packet's box (its pointer, as the skb lists link pointers) and the link to
//! the next slot of its list (16 bytes a packet); a list is a head, a tail and a length. Free slots are a
//! stack threaded through the same links, so the slot a dequeue has just emptied — whose line is in
//! cache — is the one the next enqueue fills, and a qdisc holding a few packets touches one line of
//! the slab per packet, not three (boxes, links and free stack in arrays of their own were three
//! allocations, each a cold line when thousands of qdiscs take turns: an ISP's subscriber leaves).

use crate::packet::Packet;

/// Asks the CPU to start loading `x`'s cache lines, without waiting for them: for state a discipline
/// knows it will read soon (the next flow a round robin serves) and that is likely not in cache (a flow
/// table of thousands of entries). Only a hint; nothing else changes, and elsewhere than x86-64 it does
/// nothing.
pub(crate) fn prefetch<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        let start = x as *const T as *const i8;
        let size = std::mem::size_of::<T>().max(1);
        // Every line `x` touches: one each 64 bytes from its start, and the line of its last byte
        // (an entry that straddles two lines).
        let offsets = (0..size).step_by(64).chain(std::iter::once(size - 1));
        for offset in offsets {
            // SAFETY: `prefetcht0` is a hint: it reads nothing the program sees and never faults, and
            // the addresses are inside `x`.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    start.wrapping_add(offset),
                );
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}

/// No slot: the end of a list.
const NIL: u32 = u32::MAX;

/// A packet as a list holds it: in its box ([`crate::qdisc::Qdisc::enqueue_skb`]), so that a slot is a
/// pointer and a packet enters and leaves its flow without being copied.
type Skb = Box<Packet>;

/// One FIFO list in a [`PacketLists`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PacketList {
    head: u32,
    tail: u32,
    len: u32,
}

impl PacketList {
    pub const EMPTY: PacketList = PacketList {
        head: NIL,
        tail: NIL,
        len: 0,
    };

    pub fn len(&self) -> u32 {
        self.len
    }
}

impl Default for PacketList {
    fn default() -> PacketList {
        PacketList::EMPTY
    }
}

/// One slot of a [`PacketLists`]: a queued packet and the next slot of its list, or (no packet) the next
/// free slot.
#[derive(Debug)]
struct Slot {
    skb: Option<Skb>,
    next: u32,
}

/// The packets of many [`PacketList`]s; see the module's essay. A list must only be used with the
/// `PacketLists` it was filled from.
#[derive(Debug)]
pub(crate) struct PacketLists {
    slots: Vec<Slot>,
    /// The free slots, last freed first, linked through their `next`.
    free: u32,
}

impl Default for PacketLists {
    fn default() -> PacketLists {
        PacketLists::new()
    }
}

impl PacketLists {
    pub fn new() -> PacketLists {
        PacketLists {
            slots: Vec::new(),
            free: NIL,
        }
    }

    /// Appends `pkt` to `list`.
    pub fn push_back(&mut self, list: &mut PacketList, pkt: Skb) {
        let slot = if self.free != NIL {
            let slot = self.free;
            let s = &mut self.slots[slot as usize];
            self.free = s.next;
            *s = Slot {
                skb: Some(pkt),
                next: NIL,
            };
            slot
        } else {
            let slot = u32::try_from(self.slots.len())
                .ok()
                .filter(|&s| s != NIL)
                .expect("fewer than 2^32 - 1 packets queued");
            self.slots.push(Slot {
                skb: Some(pkt),
                next: NIL,
            });
            slot
        };
        if list.tail == NIL {
            list.head = slot;
        } else {
            self.slots[list.tail as usize].next = slot;
        }
        list.tail = slot;
        list.len += 1;
    }

    /// Takes the head of `list`.
    pub fn pop_front(&mut self, list: &mut PacketList) -> Option<Skb> {
        if list.head == NIL {
            return None;
        }
        let slot = list.head;
        let s = &mut self.slots[slot as usize];
        list.head = s.next;
        if list.head == NIL {
            list.tail = NIL;
        }
        list.len -= 1;
        s.next = self.free;
        self.free = slot;
        s.skb.take()
    }

    /// Starts fetching `list`'s head packet into the cache, for a dequeue soon (see [`prefetch`]).
    pub fn prefetch_head(&self, list: &PacketList) {
        if let Some(Slot { skb: Some(p), .. }) = self.slots.get(list.head as usize) {
            prefetch(&**p);
        }
    }

    /// `list`'s packets, head first.
    #[cfg(test)]
    fn iter<'a>(&'a self, list: &PacketList) -> impl Iterator<Item = &'a Packet> + 'a {
        std::iter::successors((list.head != NIL).then_some(list.head), move |&s| {
            let n = self.slots[s as usize].next;
            (n != NIL).then_some(n)
        })
        .filter_map(move |s| self.slots[s as usize].skb.as_deref())
    }

    /// Forgets every packet; the lists filled from here must be reset to [`PacketList::EMPTY`] too.
    pub fn clear(&mut self) {
        self.slots.clear();
        self.free = NIL;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tagged(tag: u64) -> Skb {
        Box::new(Packet {
            tag,
            ..Packet::of_len(100)
        })
    }

    /// Interleaved lists keep their own FIFO order, and emptied slots are filled again before the slab
    /// grows (a queue that stays at N packets uses N slots).
    #[test]
    fn lists_interleave_in_one_slab_in_fifo_order() {
        let mut lists = PacketLists::new();
        let (mut a, mut b) = (PacketList::EMPTY, PacketList::EMPTY);
        for t in 0..6 {
            lists.push_back(if t % 2 == 0 { &mut a } else { &mut b }, tagged(t));
        }
        assert_eq!((a.len(), b.len()), (3, 3));
        let tags = |l: &PacketList, lists: &PacketLists| -> Vec<u64> {
            lists.iter(l).map(|p| p.tag).collect()
        };
        assert_eq!(tags(&a, &lists), [0, 2, 4]);
        assert_eq!(tags(&b, &lists), [1, 3, 5]);
        for round in 0..100u64 {
            let p = lists.pop_front(&mut a).expect("a has packets");
            assert_eq!(p.tag % 2, 0, "a's packets only");
            lists.push_back(&mut b, tagged(1001 + 2 * round));
            let p = lists.pop_front(&mut b).expect("b has packets");
            lists.push_back(&mut a, tagged(p.tag + 1));
        }
        assert_eq!(lists.slots.len(), 6, "the slab never grew past the queue");
        // The slot emptied last is the one filled next (its line is the one in cache).
        let emptied = a.head;
        lists.pop_front(&mut a).expect("a has packets");
        lists.push_back(&mut b, tagged(2001));
        assert_eq!(b.tail, emptied);
        assert_eq!(a.len() + b.len(), 6);
        while lists.pop_front(&mut a).is_some() {}
        assert_eq!(a, PacketList::EMPTY);
        lists.push_back(&mut a, tagged(7));
        assert_eq!(tags(&a, &lists), [7]);
    }
}
