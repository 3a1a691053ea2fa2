//! Ordered sets of arena indices, for HFSC's trees (where the kernel uses `lib/rbtree.c`).
//!
//! HFSC keeps several ordered sets of classes: each parent's active children by virtual time and by fit
//! time, and the backlogged real-time classes by eligible time and by deadline. Each packet takes the
//! smallest element of one set out and puts it back with a larger key, and with link sharing among many
//! equal classes the new key is usually the largest of its set: a round robin in key order. A B-tree
//! (`BTreeMap`) pays for that pattern twice, a linear search across every node of its right edge to insert
//! and a rebalancing of its left edge to remove; at 10 000 children the two cost HFSC more than everything
//! else together.
//!
//! A **treap** is a binary search tree on the keys that is also a heap on random priorities, which keeps it
//! balanced in expectation (depth ≈ 2 ln n) without the rb-tree's case analysis. It suits the pattern well:
//!
//! - inserting the largest key walks only the right spine (≈ ln n nodes) and rotates the new leaf up,
//!   ≈ 1 rotation on average;
//! - removing a node rotates it down until it has at most one child, then splices it out: the smallest
//!   node has no left child, so it is spliced at once, and removal never searches (nodes know their parent);
//! - the first, the last and in-order successors are walks along parent and child links, as `rb_first`,
//!   `rb_last` and `rb_next` are.
//!
//! A node lives at its element's index in one `Vec` per kind of tree (a [`Forest`]), so a class is a node
//! in its parent's tree without any allocation, and many trees (one per parent) share one forest; each
//! tree is a [`Tree`] held by its owner: the root, and the first and last elements, so that taking the
//! first and appending after the last (the round robin above) need no walk from the root. Priorities come from a counter run through a mixing function,
//! so the shape is the same on every run: no randomness from outside, no dependence on addresses.
//! Equal keys go to the right, as the kernel's insertions do, so they leave in insertion order.
//!
//! The forest does not record which tree an index belongs to: its owner must only remove, or ask for the
//! successor of, an index it inserted and has not removed since.

/// The absent index: no child, no parent, an empty tree.
pub const NIL: u32 = u32::MAX;

#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
struct Node<K> {
    key: K,
    prio: u32,
    parent: u32,
    left: u32,
    right: u32,
}

/// One tree of a [`Forest`]: its root and its first and last elements (all NIL when empty).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Tree {
    root: u32,
    first: u32,
    last: u32,
}

impl Tree {
    pub const EMPTY: Tree = Tree {
        root: NIL,
        first: NIL,
        last: NIL,
    };

    /// The element with the smallest key (the first inserted among equals).
    pub fn first(&self) -> Option<u32> {
        (self.first != NIL).then_some(self.first)
    }

    /// The element with the largest key (the last inserted among equals).
    pub fn last(&self) -> Option<u32> {
        (self.last != NIL).then_some(self.last)
    }
}

impl Default for Tree {
    fn default() -> Tree {
        Tree::EMPTY
    }
}

/// Nodes for any number of trees over one index space; see the module's essay.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct Forest<K> {
    nodes: Vec<Node<K>>,
    draws: u64,
}

impl<K: Ord + Copy + Default> Forest<K> {
    pub fn new() -> Forest<K> {
        Forest {
            nodes: Vec::new(),
            draws: 0,
        }
    }

    fn n(&self, i: u32) -> &Node<K> {
        &self.nodes[i as usize]
    }

    fn nm(&mut self, i: u32) -> &mut Node<K> {
        &mut self.nodes[i as usize]
    }

    /// The key `i` was inserted with.
    pub fn key(&self, i: u32) -> K {
        self.n(i).key
    }

    /// SplitMix64 over a counter: well-mixed, reproducible priorities.
    fn draw(&mut self) -> u32 {
        crate::flow::splitmix64(&mut self.draws) as u32
    }

    /// Puts `i` into `tree` under `key`, after any equal keys.
    pub fn insert(&mut self, tree: &mut Tree, i: u32, key: K) {
        assert!(i != NIL, "index {i} is reserved");
        if self.nodes.len() <= i as usize {
            self.nodes.resize(i as usize + 1, Node::default());
        }
        let prio = self.draw();
        let (parent, left) = if tree.root == NIL {
            (NIL, false)
        } else if key >= self.n(tree.last).key {
            // After the last: its right child, with no walk from the root.
            (tree.last, false)
        } else {
            let mut parent = NIL;
            let mut at = tree.root;
            let mut left = false;
            while at != NIL {
                parent = at;
                left = key < self.n(at).key;
                at = if left {
                    self.n(at).left
                } else {
                    self.n(at).right
                };
            }
            (parent, left)
        };
        *self.nm(i) = Node {
            key,
            prio,
            parent,
            left: NIL,
            right: NIL,
        };
        if parent == NIL {
            *tree = Tree {
                root: i,
                first: i,
                last: i,
            };
            return;
        }
        if left {
            self.nm(parent).left = i;
            if parent == tree.first {
                tree.first = i;
            }
        } else {
            self.nm(parent).right = i;
            if parent == tree.last {
                tree.last = i;
            }
        }
        while self.n(i).parent != NIL && self.n(self.n(i).parent).prio < prio {
            self.rotate_up(&mut tree.root, i);
        }
    }

    /// Takes `i` out of `tree`.
    pub fn remove(&mut self, tree: &mut Tree, i: u32) {
        if tree.first == i {
            tree.first = self.next(i).unwrap_or(NIL);
        }
        if tree.last == i {
            tree.last = self.prev(i).unwrap_or(NIL);
        }
        let root = &mut tree.root;
        loop {
            let Node { left, right, .. } = *self.n(i);
            if left == NIL || right == NIL {
                let child = if left == NIL { right } else { left };
                self.replace(root, i, child);
                return;
            }
            // Two children: the one with the higher priority takes `i`'s place, `i` goes down a level.
            let up = if self.n(left).prio > self.n(right).prio {
                left
            } else {
                right
            };
            self.rotate_up(root, up);
        }
    }

    /// Puts `with` (NIL, or a child of `i`) where `i` was.
    fn replace(&mut self, root: &mut u32, i: u32, with: u32) {
        let parent = self.n(i).parent;
        if with != NIL {
            self.nm(with).parent = parent;
        }
        if parent == NIL {
            *root = with;
        } else if self.n(parent).left == i {
            self.nm(parent).left = with;
        } else {
            self.nm(parent).right = with;
        }
    }

    /// Rotates `x` above its parent, keeping the in-order sequence.
    fn rotate_up(&mut self, root: &mut u32, x: u32) {
        let p = self.n(x).parent;
        let g = self.n(p).parent;
        if self.n(p).left == x {
            let inner = self.n(x).right;
            self.nm(p).left = inner;
            if inner != NIL {
                self.nm(inner).parent = p;
            }
            self.nm(x).right = p;
        } else {
            let inner = self.n(x).left;
            self.nm(p).right = inner;
            if inner != NIL {
                self.nm(inner).parent = p;
            }
            self.nm(x).left = p;
        }
        self.nm(p).parent = x;
        self.nm(x).parent = g;
        if g == NIL {
            *root = x;
        } else if self.n(g).left == p {
            self.nm(g).left = x;
        } else {
            self.nm(g).right = x;
        }
    }

    /// The element after `i` in key order.
    pub fn next(&self, i: u32) -> Option<u32> {
        self.step(i, |n| n.right, |n| n.left)
    }

    /// The element before `i` in key order.
    fn prev(&self, i: u32) -> Option<u32> {
        self.step(i, |n| n.left, |n| n.right)
    }

    /// `next` with `ahead` the right link and `back` the left one, `prev` with them swapped: the
    /// extreme `back` of the `ahead` subtree, else the first ancestor reached from its `back` side.
    fn step(&self, i: u32, ahead: fn(&Node<K>) -> u32, back: fn(&Node<K>) -> u32) -> Option<u32> {
        let mut at = ahead(self.n(i));
        if at != NIL {
            while back(self.n(at)) != NIL {
                at = back(self.n(at));
            }
            return Some(at);
        }
        at = i;
        loop {
            let parent = self.n(at).parent;
            if parent == NIL {
                return None;
            }
            if back(self.n(parent)) == at {
                return Some(parent);
            }
            at = parent;
        }
    }

    /// `tree` in key order.
    pub fn iter(&self, tree: &Tree) -> impl Iterator<Item = u32> + '_ {
        std::iter::successors(tree.first(), move |&i| self.next(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Checks the links, the search order and the heap order of `tree`, and its first and last against
    /// walks from the root; returns its depth.
    fn check<K: Ord + Copy + Default + std::fmt::Debug>(f: &Forest<K>, tree: &Tree) -> usize {
        fn walk<K: Ord + Copy + Default + std::fmt::Debug>(
            f: &Forest<K>,
            i: u32,
            parent: u32,
        ) -> usize {
            if i == NIL {
                return 0;
            }
            let n = f.n(i);
            assert_eq!(n.parent, parent, "node {i}'s parent link");
            for c in [n.left, n.right] {
                if c != NIL {
                    assert!(f.n(c).prio <= n.prio, "heap order at {i}");
                }
            }
            // Rotations may put an equal key on the left; the in-order sequence stays insertion order.
            if n.left != NIL {
                assert!(f.n(n.left).key <= n.key, "search order left of {i}");
            }
            if n.right != NIL {
                assert!(f.n(n.right).key >= n.key, "search order right of {i}");
            }
            1 + walk(f, n.left, i).max(walk(f, n.right, i))
        }
        let extreme = |link: fn(&Node<K>) -> u32| {
            let mut at = tree.root;
            while at != NIL && link(f.n(at)) != NIL {
                at = link(f.n(at));
            }
            at
        };
        assert_eq!(tree.first, extreme(|n| n.left), "the cached first");
        assert_eq!(tree.last, extreme(|n| n.right), "the cached last");
        walk(f, tree.root, NIL)
    }

    /// A deterministic generator for the operations (xorshift64).
    fn rng(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    /// Random inserts and removals, with many equal keys, against a `BTreeMap` keyed by (key, insertion
    /// order): same order, same first and last, after every operation.
    #[test]
    fn it_orders_as_a_btree_keyed_by_insertion_order() {
        let mut f: Forest<u64> = Forest::new();
        let mut tree = Tree::EMPTY;
        let mut model: BTreeMap<(u64, u64), u32> = BTreeMap::new();
        let mut key_of: Vec<Option<(u64, u64)>> = vec![None; 300];
        let mut s = 0x1234_5678_9abc_def1u64;
        for step in 0..20_000u64 {
            let i = (rng(&mut s) % 300) as u32;
            match key_of[i as usize] {
                Some(k) => {
                    f.remove(&mut tree, i);
                    model.remove(&k);
                    key_of[i as usize] = None;
                }
                None => {
                    let key = rng(&mut s) % 50;
                    f.insert(&mut tree, i, key);
                    model.insert((key, step), i);
                    key_of[i as usize] = Some((key, step));
                }
            }
            check(&f, &tree);
            assert_eq!(tree.first(), model.values().next().copied());
            assert_eq!(tree.last(), model.values().next_back().copied());
            if step % 97 == 0 {
                let ours: Vec<u32> = f.iter(&tree).collect();
                let theirs: Vec<u32> = model.values().copied().collect();
                assert_eq!(ours, theirs, "order after step {step}");
            }
        }
    }

    /// HFSC's pattern: 10 000 elements served in a round robin (take the first, put it back last). The
    /// tree stays balanced: depth within a small multiple of log2(10 000) ≈ 13.3 (2 ln n ≈ 18.4 expected).
    #[test]
    fn a_round_robin_keeps_it_shallow() {
        let mut f: Forest<u128> = Forest::new();
        let mut tree = Tree::EMPTY;
        for i in 0..10_000u32 {
            f.insert(&mut tree, i, i as u128);
        }
        for step in 0..100_000u128 {
            let first = tree.first().unwrap();
            assert_eq!(f.key(first), step, "the round robin's order");
            f.remove(&mut tree, first);
            f.insert(&mut tree, first, step + 10_000);
        }
        let depth = check(&f, &tree);
        assert!(depth <= 40, "depth {depth}");
        assert_eq!(f.iter(&tree).count(), 10_000);
    }

    /// Several trees share one forest without disturbing each other.
    #[test]
    fn trees_in_one_forest_are_independent() {
        let mut f: Forest<u64> = Forest::new();
        let (mut a, mut b) = (Tree::EMPTY, Tree::EMPTY);
        for i in 0..20u32 {
            let root = if i % 2 == 0 { &mut a } else { &mut b };
            f.insert(root, i, 100 - i as u64);
        }
        f.remove(&mut a, 10);
        check(&f, &a);
        check(&f, &b);
        let evens: Vec<u32> = f.iter(&a).collect();
        let odds: Vec<u32> = f.iter(&b).collect();
        assert_eq!(evens, [18, 16, 14, 12, 8, 6, 4, 2, 0]);
        assert_eq!(odds, [19, 17, 15, 13, 11, 9, 7, 5, 3, 1]);
        assert_eq!(Tree::EMPTY.first(), None);
        assert_eq!(Tree::EMPTY.last(), None);
    }
}
