//! The engine's state as bytes, and back: what the policy store keeps beside its journal so that a cold
//! read loads the engine instead of replaying every command (issue 26; `crates/tc/src/store.rs` says
//! when it is written and when it is trusted).
//!
//! # What is saved
//!
//! The engine's own structures, field by field (serde, in postcard's compact binary form), not the
//! options a `show` prints: what only history decides — the class hash's and `qdisc_hash`'s orders,
//! automatic handles, u32's node ids and table cursor, HTB's round-robin pointers and token counts —
//! comes back exactly, so the journal's later records replay on top as they would on the replayed
//! engine. Each filter block is a byte string of its own, which a read that prints no filter skips
//! unread ([`without_filters`]); so are the class trees of the kinds that can hold thousands of
//! classes, which a filter listing of the root's or ingress's blocks skips ([`FilterListing`]).
//! The routes' realms (`ip route … realm`) and each root's driver requeues come with it. Queued packets are never saved: a store's engine carries no traffic, and an
//! engine that holds any has no snapshot.
//!
//! # What has no snapshot
//!
//! Every kind has a form: a discipline saves itself through [`crate::qdisc::Qdisc::save`] and is
//! rebuilt through [`RESTORE`], its line here (a new kind without both makes [`Engine::snapshot`]
//! answer `Err` until it has them); classifiers and actions derive theirs, and the mangle table
//! (`tclab iptables`) and the teql master come whole. What stands in the way is traffic: a packet
//! queued anywhere (each `save` refuses then) or a connection in conntrack's table; the store then
//! replays its journal as before. Wrong bytes (a snapshot of another build, cut short) fail to
//! decode with an error, never into another engine: the store checks a checksum and its build's
//! identity before it decodes anything, so a layout changed by a new form never meets old bytes.

use crate::qdisc::{Qdisc, Sched};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Rebuild a discipline from what its [`Qdisc::save`] wrote.
pub type RestoreFn = fn(&[u8]) -> Result<Box<dyn Qdisc>, postcard::Error>;

/// A discipline that has a snapshot form: its kind and how to rebuild it.
pub struct Restore {
    pub kind: &'static str,
    pub restore: RestoreFn,
}

/// Restore a saved discipline of type `Q` (what each kind's line in [`RESTORE`] calls).
fn restore<Q: Qdisc + for<'de> Deserialize<'de> + 'static>(
    bytes: &[u8],
) -> Result<Box<dyn Qdisc>, postcard::Error> {
    Ok(Box::new(postcard::from_bytes::<Q>(bytes)?))
}

/// Save a discipline of type `Q` (what each kind's [`Qdisc::save`] calls once it has checked that
/// nothing is queued).
pub(crate) fn save<Q: Serialize>(q: &Q) -> Option<Vec<u8>> {
    postcard::to_allocvec(q).ok()
}

/// The disciplines with a snapshot form.
pub const RESTORE: &[Restore] = &[
    Restore {
        kind: "pfifo",
        restore: restore::<crate::qdisc::fifo::Fifo>,
    },
    Restore {
        kind: "bfifo",
        restore: restore::<crate::qdisc::fifo::Fifo>,
    },
    Restore {
        kind: "pfifo_head_drop",
        restore: restore::<crate::qdisc::fifo::Fifo>,
    },
    Restore {
        kind: "pfifo_fast",
        restore: restore::<crate::qdisc::pfifo_fast::PfifoFast>,
    },
    Restore {
        kind: "noqueue",
        restore: restore::<crate::qdisc::noqueue::Noqueue>,
    },
    Restore {
        kind: "htb",
        restore: restore::<crate::qdisc::htb::Htb>,
    },
    Restore {
        kind: "tbf",
        restore: restore::<crate::qdisc::tbf::Tbf>,
    },
    Restore {
        kind: "prio",
        restore: restore::<crate::qdisc::prio::Prio>,
    },
    Restore {
        kind: "sfq",
        restore: restore::<crate::qdisc::sfq::Sfq>,
    },
    Restore {
        kind: "fq_codel",
        restore: restore::<crate::qdisc::fq_codel::FqCodel>,
    },
    Restore {
        kind: "mq",
        restore: restore::<crate::qdisc::mq::Mq>,
    },
    Restore {
        kind: "ingress",
        restore: restore::<crate::qdisc::ingress::Ingress>,
    },
    Restore {
        kind: "clsact",
        restore: restore::<crate::qdisc::ingress::Ingress>,
    },
    Restore {
        kind: "netem",
        restore: restore::<crate::qdisc::netem::Netem>,
    },
    Restore {
        kind: "hfsc",
        restore: restore::<crate::qdisc::hfsc::Hfsc>,
    },
    Restore {
        kind: "drr",
        restore: restore::<crate::qdisc::drr::Drr>,
    },
    Restore {
        kind: "qfq",
        restore: restore::<crate::qdisc::qfq::Qfq>,
    },
    Restore {
        kind: "ets",
        restore: restore::<crate::qdisc::ets::Ets>,
    },
    Restore {
        kind: "red",
        restore: restore::<crate::qdisc::red::Red>,
    },
    Restore {
        kind: "cake",
        restore: restore::<crate::qdisc::cake::Cake>,
    },
    Restore {
        kind: "cbq",
        restore: restore::<crate::qdisc::cbq::Cbq>,
    },
    Restore {
        kind: "codel",
        restore: restore::<crate::qdisc::codel::Codel>,
    },
    Restore {
        kind: "fq",
        restore: restore::<crate::qdisc::fq::Fq>,
    },
    Restore {
        kind: "fq_pie",
        restore: restore::<crate::qdisc::fq_pie::FqPie>,
    },
    Restore {
        kind: "pie",
        restore: restore::<crate::qdisc::pie::Pie>,
    },
    Restore {
        kind: "choke",
        restore: restore::<crate::qdisc::choke::Choke>,
    },
    Restore {
        kind: "sfb",
        restore: restore::<crate::qdisc::sfb::Sfb>,
    },
    Restore {
        kind: "gred",
        restore: restore::<crate::qdisc::gred::Gred>,
    },
    Restore {
        kind: "cbs",
        restore: restore::<crate::qdisc::cbs::Cbs>,
    },
    Restore {
        kind: "etf",
        restore: restore::<crate::qdisc::etf::Etf>,
    },
    Restore {
        kind: "hhf",
        restore: restore::<crate::qdisc::hhf::Hhf>,
    },
    Restore {
        kind: "plug",
        restore: restore::<crate::qdisc::plug::Plug>,
    },
    Restore {
        kind: "skbprio",
        restore: restore::<crate::qdisc::skbprio::Skbprio>,
    },
    Restore {
        kind: "mqprio",
        restore: restore::<crate::qdisc::mqprio::Mqprio>,
    },
    Restore {
        kind: "multiq",
        restore: restore::<crate::qdisc::multiq::Multiq>,
    },
    Restore {
        kind: "taprio",
        restore: restore::<crate::qdisc::taprio::Taprio>,
    },
    Restore {
        kind: "noop",
        restore: restore::<crate::qdisc::mq::Noop>,
    },
    Restore {
        kind: crate::qdisc::teql::MASTER,
        restore: restore::<crate::qdisc::teql::Teql>,
    },
];

/// A byte string serialised as one (postcard: a length and the bytes), not as a sequence of numbers.
struct Bytes<'a>(&'a [u8]);

impl Serialize for Bytes<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(self.0)
    }
}

/// A qdisc as its kind, its own state and where it sits.
impl Serialize for Sched {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let kind = self.q.kind();
        let Some(state) = self.q.save() else {
            return Err(refuse(format!("qdisc {kind}")));
        };
        (
            self.handle,
            self.parent,
            kind,
            Bytes(&state),
            &self.stab,
            self.requeues,
        )
            .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Sched {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Sched, D::Error> {
        // Kind and state borrowed from the snapshot's bytes: no copy of either per qdisc.
        let (handle, parent, kind, state, stab, requeues): (
            crate::Handle,
            crate::Handle,
            &'de str,
            &'de [u8],
            Option<crate::stab::SizeTable>,
            u32,
        ) = Deserialize::deserialize(d)?;
        let r = RESTORE
            .iter()
            .find(|r| r.kind == kind)
            .ok_or_else(|| D::Error::custom(format!("qdisc {kind} has no snapshot form")))?;
        let q = (r.restore)(state).map_err(|e| D::Error::custom(format!("{kind}: {e}")))?;
        if q.kind() != kind {
            return Err(D::Error::custom(format!("{kind} restored as {}", q.kind())));
        }
        Ok(Sched {
            handle,
            parent,
            q,
            stab,
            requeues,
        })
    }
}

/// `[T; N]` as a sequence (serde derives arrays up to 32 elements only).
pub(crate) mod array {
    use super::*;
    pub fn serialize<S: Serializer, T: Serialize, const N: usize>(
        a: &[T; N],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        a.as_slice().serialize(s)
    }
    pub fn deserialize<'de, D: Deserializer<'de>, T: Deserialize<'de>, const N: usize>(
        d: D,
    ) -> Result<[T; N], D::Error> {
        let v = Vec::<T>::deserialize(d)?;
        v.try_into()
            .map_err(|v: Vec<T>| D::Error::invalid_length(v.len(), &"the array's length"))
    }
}

/// `[[T; M]; N]` as a sequence of rows, each up to its last element that is not `T::default()` (HHF's
/// 4 × 1 024 counters and valid bits: serde derives neither length, and in a store's HHF, which no
/// packet has passed, every one is zero — 9 KB a qdisc saved whole).
pub(crate) mod grid {
    use super::*;
    pub fn serialize<
        S: Serializer,
        T: Serialize + Default + PartialEq,
        const M: usize,
        const N: usize,
    >(
        g: &[[T; M]; N],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let zero = T::default();
        let rows: Vec<&[T]> = g
            .iter()
            .map(|r| &r[..r.iter().rposition(|x| *x != zero).map_or(0, |i| i + 1)])
            .collect();
        rows.serialize(s)
    }
    pub fn deserialize<
        'de,
        D: Deserializer<'de>,
        T: Deserialize<'de> + Default,
        const M: usize,
        const N: usize,
    >(
        d: D,
    ) -> Result<[[T; M]; N], D::Error> {
        let rows = Vec::<Vec<T>>::deserialize(d)?
            .into_iter()
            .map(|mut r| {
                if r.len() > M {
                    return Err(D::Error::invalid_length(
                        r.len(),
                        &"at most the row's length",
                    ));
                }
                r.resize_with(M, T::default);
                r.try_into()
                    .map_err(|r: Vec<T>| D::Error::invalid_length(r.len(), &"the row's length"))
            })
            .collect::<Result<Vec<[T; M]>, _>>()?;
        rows.try_into()
            .map_err(|v: Vec<[T; M]>| D::Error::invalid_length(v.len(), &"the rows"))
    }
}

/// `[u8; N]` as its bytes up to the last that is not zero (flower's 255-byte tunnel options, empty in
/// most keys and masks: three a filter, whole they were most of a flower policy's snapshot).
pub(crate) mod zero_padded {
    use super::*;
    pub fn serialize<S: Serializer, const N: usize>(a: &[u8; N], s: S) -> Result<S::Ok, S::Error> {
        let n = a.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        s.serialize_bytes(&a[..n])
    }
    pub fn deserialize<'de, D: Deserializer<'de>, const N: usize>(
        d: D,
    ) -> Result<[u8; N], D::Error> {
        let b = <&'de [u8]>::deserialize(d)?;
        let mut a = [0u8; N];
        a.get_mut(..b.len())
            .ok_or_else(|| D::Error::invalid_length(b.len(), &"at most the array's length"))?
            .copy_from_slice(b);
        Ok(a)
    }
}

/// A ring of packet slots (CHOKe's `tab`), saved empty: its length alone. A slot holding a packet
/// refuses, though the qdisc saves only when none does.
pub(crate) mod empty_slots {
    use super::*;
    pub fn serialize<S: Serializer, T>(v: &[Option<T>], s: S) -> Result<S::Ok, S::Error> {
        if v.iter().any(Option::is_some) {
            return Err(refuse("a queued packet".into()));
        }
        (v.len() as u64).serialize(s)
    }
    pub fn deserialize<'de, D: Deserializer<'de>, T>(d: D) -> Result<Vec<Option<T>>, D::Error> {
        let n = u64::deserialize(d)?;
        // A ring is empty or a power of two, 2^17 at most (CHOKE_MAX_QUEUE + 1 rounded up).
        if n > 1 << 17 || n != 0 && !n.is_power_of_two() {
            return Err(D::Error::custom(format!("a ring of {n} slots")));
        }
        Ok((0..n).map(|_| None).collect())
    }
}

/// Bitmap words allocated 64 at a time (`Box<[u64; 64]>`), in an array of groups or a map by key.
pub(crate) mod words {
    use super::*;
    use std::collections::BTreeMap;

    fn boxed<E: serde::de::Error>(v: Vec<u64>) -> Result<Box<[u64; 64]>, E> {
        let b: Box<[u64]> = v.into_boxed_slice();
        b.try_into()
            .map_err(|b: Box<[u64]>| E::invalid_length(b.len(), &"64 words"))
    }

    /// HTB's `MinorSet` words: 16 groups of 64 words, each allocated on first use.
    type Groups = [Option<Box<[u64; 64]>>; 16];

    pub fn serialize<S: Serializer>(groups: &Groups, s: S) -> Result<S::Ok, S::Error> {
        let v: Vec<Option<&[u64]>> = groups
            .iter()
            .map(|g| g.as_deref().map(|w| &w[..]))
            .collect();
        v.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Groups, D::Error> {
        let v = Vec::<Option<Vec<u64>>>::deserialize(d)?;
        if v.len() != 16 {
            return Err(D::Error::invalid_length(v.len(), &"16 groups"));
        }
        let mut out: Groups = Default::default();
        for (o, g) in out.iter_mut().zip(v) {
            *o = g.map(boxed).transpose()?;
        }
        Ok(out)
    }

    pub mod map {
        use super::*;
        pub fn serialize<S: Serializer>(
            m: &BTreeMap<u32, Box<[u64; 64]>>,
            s: S,
        ) -> Result<S::Ok, S::Error> {
            let v: Vec<(u32, &[u64])> = m.iter().map(|(k, w)| (*k, &w[..])).collect();
            v.serialize(s)
        }
        pub fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<BTreeMap<u32, Box<[u64; 64]>>, D::Error> {
            Vec::<(u32, Vec<u64>)>::deserialize(d)?
                .into_iter()
                .map(|(k, w)| Ok((k, boxed(w)?)))
                .collect()
        }
    }
}

thread_local! {
    /// Set while [`without_filters`] decodes: every filter block is skipped unread.
    static WITHOUT_FILTERS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Set while [`without_classes`] decodes: every HTB's classes are skipped unread.
    static WITHOUT_CLASSES: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Run `decode` with `flag` set, cleared again however it ends.
fn with_flag<R>(
    flag: &'static std::thread::LocalKey<std::cell::Cell<bool>>,
    decode: impl FnOnce() -> R,
) -> R {
    struct Reset(&'static std::thread::LocalKey<std::cell::Cell<bool>>);
    impl Drop for Reset {
        fn drop(&mut self) {
            self.0.with(|w| w.set(false));
        }
    }
    flag.with(|w| w.set(true));
    let _reset = Reset(flag);
    decode()
}

/// Run `decode` (an [`crate::Engine::from_snapshot`]) with every filter block left empty, its bytes
/// skipped unread: for a read whose answer no filter changes (a qdisc or class listing), as the
/// store's replay for such a read skips filter and action records. The engine it gives is for that
/// read only — its qdiscs and classes as saved, no filters — and must not be changed and saved.
pub fn without_filters<R>(decode: impl FnOnce() -> R) -> R {
    with_flag(&WITHOUT_FILTERS, decode)
}

/// Whether filter blocks are being skipped ([`without_filters`]).
pub(crate) fn skipping_filters() -> bool {
    WITHOUT_FILTERS.with(|w| w.get())
}

/// Run `decode` with the class trees left out, their bytes skipped unread: the classes (with their
/// leaf qdiscs) of every HTB, HFSC, DRR and QFQ with their class hashes (and HFSC's per-class tree
/// nodes), and each device's index of the qdiscs under classes (`qdisc_hash`, `parent_of`). HTB
/// and HFSC keep their index of classes by minor, so whether a class exists is still known; a DRR
/// or QFQ then has no class at all, which lists the same, since neither takes filters on a class
/// (`drr_tcf_block`, `qfq_tcf_block`: no block, an empty dump, as for a class that does not
/// exist). CBQ keeps its filter blocks in its classes, and PRIO, ETS and multiq have 16 bands at
/// most: theirs are decoded. 10 001 classes and their leaves were most of the decoding of a
/// LibreQoS-sized engine that a filter listing reads none of. What it gives is not a whole engine
/// (an HTB there knows its classes' minors but holds none of them), so only [`FilterListing`]
/// calls this and keeps the engine to itself.
fn without_classes<R>(decode: impl FnOnce() -> R) -> R {
    with_flag(&WITHOUT_CLASSES, decode)
}

/// One filter listing (`tc filter show dev DEV [parent P]`) answered from a snapshot decoded
/// without its class trees ([`without_classes`]): the engine inside is not a whole one, and this
/// type lets nothing reach it but that listing's block — a class, a qdisc under one, a change or a
/// save cannot be asked of it, so none can find a class that was never decoded.
pub struct FilterListing {
    engine: crate::Engine,
    dev: String,
    parent: crate::Handle,
}

impl FilterListing {
    /// Decode `bytes` (an [`crate::Engine::snapshot`]) for the listing of `dev`'s filters under
    /// `parent` (`Handle::UNSPEC`: none given). `Ok(None)` if that listing needs the whole engine:
    /// its parent is a qdisc below the device's root, found only through the class trees.
    pub fn decode(
        bytes: &[u8],
        dev: &str,
        parent: crate::Handle,
    ) -> Result<Option<FilterListing>, String> {
        let engine = without_classes(|| crate::Engine::from_snapshot(bytes))?;
        // `resolve_block` finds these without a class or the qdisc index: the root or the ingress
        // qdisc by handle, then whether a class exists by its minor, which every kind keeps.
        let answers = match engine.device(dev) {
            // The listing's answer is tc's "Cannot find device".
            None => true,
            Some(d) => {
                parent == crate::Handle::UNSPEC
                    || parent == crate::Handle::ROOT
                    || parent.major() == crate::Handle::INGRESS.major()
                    || (d.root().handle != crate::Handle::UNSPEC
                        && parent.qdisc() == d.root().handle)
            }
        };
        Ok(answers.then(|| FilterListing {
            engine,
            dev: dev.to_string(),
            parent,
        }))
    }

    /// Whether the device exists.
    pub fn has_device(&self) -> bool {
        self.engine.device(&self.dev).is_some()
    }

    /// What [`crate::Engine::filter_block`] answers for `dev` and `parent`, which must be the ones
    /// this was decoded for: any other is refused with an error saying so, never looked up.
    pub fn filter_block(
        &mut self,
        dev: &str,
        parent: crate::Handle,
    ) -> Result<Option<(&crate::filter::Block, crate::Handle)>, crate::KernelError> {
        if dev != self.dev || parent != self.parent {
            return Err(crate::KernelError::invalid(
                "this engine was decoded for one filter listing only (another device or parent)",
            ));
        }
        self.engine.filter_block(dev, parent)
    }
}

/// A field saved as a byte string of its own, which a decode under [`without_classes`] skips
/// unread, leaving the field's default (`#[serde(with = "crate::snapshot::classes")]`).
pub(crate) mod classes {
    use super::*;
    pub fn serialize<S: Serializer, T: Serialize>(v: &T, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&nested::<T, S::Error>(v)?)
    }
    pub fn deserialize<'de, D: Deserializer<'de>, T: Default + for<'a> Deserialize<'a>>(
        d: D,
    ) -> Result<T, D::Error> {
        let bytes = <&'de [u8]>::deserialize(d)?;
        if WITHOUT_CLASSES.with(|w| w.get()) {
            return Ok(T::default());
        }
        decode(bytes).map_err(D::Error::custom)
    }
}

/// A value as a byte string of its own (postcard inside postcard): what a decode may skip whole.
pub(crate) fn nested<T: Serialize, E: serde::ser::Error>(value: &T) -> Result<Vec<u8>, E> {
    // A refusal inside keeps its message ([`refuse`] records the innermost).
    postcard::to_allocvec(value).map_err(E::custom)
}

thread_local! {
    /// What the last refusal to serialise was about (postcard's errors carry no message).
    static REFUSED: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// A serialisation error saying that `what` has no snapshot form.
pub(crate) fn refuse<E: serde::ser::Error>(what: String) -> E {
    let e = E::custom(&what);
    // The innermost refusal says most: a qdisc that refuses because of its filter's kind keeps it.
    REFUSED.with(|r| {
        r.borrow_mut().get_or_insert(what);
    });
    e
}

/// Why an engine has no snapshot: what stood in the way, for a message or a test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoSnapshot(pub String);

impl std::fmt::Display for NoSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "no snapshot form: {}", self.0)
    }
}

/// Encode `value`, or say what has no snapshot form.
pub(crate) fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, NoSnapshot> {
    REFUSED.with(|r| r.borrow_mut().take());
    postcard::to_allocvec(value).map_err(|e| {
        NoSnapshot(
            REFUSED
                .with(|r| r.borrow_mut().take())
                .unwrap_or(e.to_string()),
        )
    })
}

/// Decode a whole value: trailing bytes are an error (a snapshot of another layout).
pub(crate) fn decode<T: for<'de> Deserialize<'de>>(bytes: &[u8]) -> Result<T, String> {
    let (v, rest) = postcard::take_from_bytes::<T>(bytes).map_err(|e| e.to_string())?;
    if !rest.is_empty() {
        return Err(format!("{} bytes left over", rest.len()));
    }
    Ok(v)
}
