//! The classes of one flat classful qdisc (DRR, QFQ), found by classid minor in O(1).
//!
//! The kernel keeps these classes in a `Qdisc_class_hash` and finds a packet's class by hashing its
//! classid. tclab first kept them in a B-tree keyed by classid, which costs O(log N) cache misses per
//! packet: with tens of thousands of classes the lookup, not the scheduling, dominated DRR's and QFQ's
//! cost (the README's flat-qdisc table). Every class of a qdisc shares the qdisc's major number, so the
//! 16-bit minor identifies it: an index by minor (4 bytes a slot, grown to the highest minor in use)
//! points into a dense arena of classes, as HTB's `by_minor` does. Iteration goes by minor, which is the
//! B-tree's classid order.

/// Classes by classid, indexed by minor.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct ClassTable<T> {
    /// Arena index + 1 of the class with each minor (0: none).
    by_minor: Vec<u32>,
    /// (classid, class); a removed class leaves a hole that the next insert reuses.
    arena: Vec<Option<(u32, T)>>,
    free: Vec<u32>,
}

impl<T> Default for ClassTable<T> {
    fn default() -> Self {
        ClassTable {
            by_minor: Vec::new(),
            arena: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<T> ClassTable<T> {
    pub fn new() -> Self {
        Self::default()
    }

    fn slot(&self, classid: u32) -> Option<usize> {
        let i = *self.by_minor.get((classid & 0xffff) as usize)?;
        let i = i.checked_sub(1)? as usize;
        // Another major's classid with the same minor is not this qdisc's class.
        (self.arena[i].as_ref()?.0 == classid).then_some(i)
    }

    pub fn contains_key(&self, classid: &u32) -> bool {
        self.slot(*classid).is_some()
    }

    pub fn get(&self, classid: &u32) -> Option<&T> {
        let i = self.slot(*classid)?;
        self.arena[i].as_ref().map(|(_, c)| c)
    }

    pub fn get_mut(&mut self, classid: &u32) -> Option<&mut T> {
        let i = self.slot(*classid)?;
        self.arena[i].as_mut().map(|(_, c)| c)
    }

    /// Insert or replace the class `classid`; the replaced class is returned. Every classid of one table
    /// has the same major (the qdisc's); one with another major takes the minor's slot over.
    pub fn insert(&mut self, classid: u32, class: T) -> Option<T> {
        let minor = (classid & 0xffff) as usize;
        if self.by_minor.len() <= minor {
            self.by_minor.resize(minor + 1, 0);
        }
        if let Some(i) = self.by_minor[minor].checked_sub(1) {
            let old = self.arena[i as usize].replace((classid, class));
            return old.map(|(_, c)| c);
        }
        let i = match self.free.pop() {
            Some(i) => {
                self.arena[i as usize] = Some((classid, class));
                i
            }
            None => {
                self.arena.push(Some((classid, class)));
                (self.arena.len() - 1) as u32
            }
        };
        self.by_minor[minor] = i + 1;
        None
    }

    pub fn remove(&mut self, classid: &u32) -> Option<T> {
        let i = self.slot(*classid)?;
        self.by_minor[(*classid & 0xffff) as usize] = 0;
        while self.by_minor.last() == Some(&0) {
            self.by_minor.pop();
        }
        self.free.push(i as u32);
        self.arena[i].take().map(|(_, c)| c)
    }

    /// (classid, class) in classid order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &T)> {
        self.by_minor.iter().filter_map(move |&i| {
            let (id, c) = self.arena[i.checked_sub(1)? as usize].as_ref()?;
            Some((*id, c))
        })
    }

    pub fn values(&self) -> impl Iterator<Item = &T> {
        self.iter().map(|(_, c)| c)
    }

    /// The classes, mutably, in classid order.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut T> {
        // The arena in minor order: collect the order first, then hand out disjoint borrows.
        let order: Vec<usize> = self
            .by_minor
            .iter()
            .filter_map(|&i| i.checked_sub(1).map(|i| i as usize))
            .collect();
        let mut slots: Vec<Option<&mut T>> = self
            .arena
            .iter_mut()
            .map(|s| s.as_mut().map(|(_, c)| c))
            .collect();
        order.into_iter().filter_map(move |i| slots[i].take())
    }
}

impl<T> std::ops::Index<&u32> for ClassTable<T> {
    type Output = T;
    fn index(&self, classid: &u32) -> &T {
        self.get(classid).expect("a class of this qdisc")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behaves_as_the_b_tree_it_replaces() {
        // The same operations on a BTreeMap and on the table give the same lookups and the same order.
        let mut t = ClassTable::new();
        let mut m = std::collections::BTreeMap::new();
        let ops: [(bool, u32); 12] = [
            (true, 0x1_0005),
            (true, 0x1_ffff),
            (true, 0x1_0001),
            (false, 0x1_0005),
            (true, 0x1_0300),
            (true, 0x1_0005),
            (true, 0x1_0001),
            (false, 0x1_ffff),
            (false, 0x1_0042),
            (true, 0x1_0002),
            (false, 0x1_0300),
            (true, 0x1_8000),
        ];
        for (n, (add, id)) in ops.into_iter().enumerate() {
            if add {
                assert_eq!(t.insert(id, n), m.insert(id, n));
            } else {
                assert_eq!(t.remove(&id), m.remove(&id));
            }
            let a: Vec<(u32, usize)> = t.iter().map(|(k, v)| (k, *v)).collect();
            let b: Vec<(u32, usize)> = m.iter().map(|(k, v)| (*k, *v)).collect();
            assert_eq!(a, b);
        }
        // Another major with a minor in use is not found.
        assert!(!t.contains_key(&0x2_0001) && t.contains_key(&0x1_0001));
        for v in t.values_mut() {
            *v += 100;
        }
        assert_eq!(t[&0x1_0002], 109);
        assert_eq!(
            t.values().copied().collect::<Vec<_>>(),
            vec![106, 109, 105, 111]
        );
    }
}
