//! The kernel's `Qdisc_class_hash` (`net/sched/sch_api.c`), kept only for the order in which `tc class show`
//! lists classes: buckets chosen by `qdisc_class_hash`, newest first within a bucket, the table doubled (and
//! so partly reversed) when it is more than 3/4 full (`qdisc_class_hash_grow`).
//!
//! HTB, CBQ, DRR, QFQ and HFSC list their classes through it.

#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct ClassHash {
    buckets: Vec<Vec<u32>>,
    elems: usize,
}

impl Default for ClassHash {
    fn default() -> ClassHash {
        ClassHash::new()
    }
}

impl ClassHash {
    pub(crate) fn new() -> ClassHash {
        ClassHash {
            buckets: vec![Vec::new(); 4],
            elems: 0,
        }
    }

    fn bucket(id: u32, mask: usize) -> usize {
        let mut h = id;
        h ^= h >> 8;
        h ^= h >> 4;
        h as usize & mask
    }

    pub(crate) fn insert(&mut self, id: u32) {
        let b = Self::bucket(id, self.buckets.len() - 1);
        self.buckets[b].insert(0, id);
        self.elems += 1;
    }

    pub(crate) fn remove(&mut self, id: u32) {
        let b = Self::bucket(id, self.buckets.len() - 1);
        let before = self.buckets[b].len();
        self.buckets[b].retain(|&x| x != id);
        self.elems -= before - self.buckets[b].len();
    }

    /// `qdisc_class_hash_grow`.
    pub(crate) fn grow(&mut self) {
        if self.elems * 4 <= self.buckets.len() * 3 {
            return;
        }
        let nsize = self.buckets.len() * 2;
        let mut nb = vec![Vec::new(); nsize];
        for bucket in &self.buckets {
            for &id in bucket {
                nb[Self::bucket(id, nsize - 1)].insert(0, id);
            }
        }
        self.buckets = nb;
    }

    pub(crate) fn walk(&self) -> impl Iterator<Item = u32> + '_ {
        self.buckets.iter().flatten().copied()
    }
}
