//! u32 hash tables (`handle 2: u32 divisor 256`, filled with `ht 2:B:`, reached through a node with
//! `link 2:` and `hashkey mask M at OFF`): the linking node picks the bucket from the packet's word at
//! OFF under M (`u32_hash_fold`), and only that bucket's nodes are tried. A node whose own keys fix
//! that word (`match ip dst 100.64.0.6/32` under `hashkey mask 0x000000ff at 16`) can only ever see
//! packets that hash to one bucket; placed in another (`ht 2:5:`, an off-by-one of a generated
//! per-subscriber table, or a decimal bucket written where tc reads hex), it never matches, and its
//! class gets nothing through it. A link without `hashkey` sends every packet to bucket 0.

use super::{DevCx, Finding};
use tclab_core::filter::u32::{self as cu32, Hnode, Knode, TC_U32_EAT};
use tclab_core::Handle;

pub(super) fn check(cx: &DevCx, out: &mut Vec<Finding>) {
    let mut seen: Vec<*const tclab_core::filter::Block> = Vec::new();
    for &(parent, b) in &cx.blocks {
        if seen.contains(&std::ptr::from_ref(b)) {
            continue;
        }
        seen.push(b);
        let hts = &b.u32_common.hts;
        for t in hts.iter().filter(|t| t.divisor > 0) {
            let linkers: Vec<&Knode> = hts
                .iter()
                .flat_map(|h| h.buckets.iter().flatten())
                .filter(|n| n.link == Some(t.handle))
                .map(|n| &**n)
                .collect();
            for (bucket, nodes) in t.buckets.iter().enumerate() {
                for n in nodes {
                    if let Some(f) = misplaced(cx, parent, t, bucket, n, &linkers) {
                        out.push(f);
                    }
                }
            }
        }
    }
}

/// The bucket every packet `n` can match is hashed to by `linker`, if `n`'s keys decide it.
fn bucket_of(t: &Hnode, linker: &Knode, n: &Knode) -> Option<u32> {
    let (hmask, hoff) = (linker.sel.hmask, linker.sel.hoff);
    if hmask == 0 {
        return Some(0);
    }
    // After `eat` the linked table's keys count from another offset than the hashed word.
    if linker.sel.flags & TC_U32_EAT != 0 {
        return None;
    }
    let k = n
        .sel
        .keys
        .iter()
        .find(|k| k.offmask == 0 && k.off == i32::from(hoff) && k.mask & hmask == hmask)?;
    Some(t.divisor & ((k.val & hmask) >> hmask.trailing_zeros()))
}

/// A finding for node `n` in `bucket` of table `t` when every node linking to `t` hashes the packets
/// `n` can match to another bucket.
fn misplaced(
    cx: &DevCx,
    parent: Handle,
    t: &Hnode,
    bucket: usize,
    n: &Knode,
    linkers: &[&Knode],
) -> Option<Finding> {
    let wanted: Vec<u32> = linkers
        .iter()
        .map(|l| bucket_of(t, l, n))
        .collect::<Option<_>>()?;
    let first = *wanted.first()?;
    if wanted.iter().any(|&w| w != first) || first as usize == bucket {
        return None;
    }
    let table = cu32::user_htid(t.handle);
    let fh = format!("{table:x}:{bucket:x}:{:x}", cu32::node(n.handle));
    let l = linkers[0];
    let how = if l.sel.hmask == 0 {
        format!("the node linking to {table:x}: has no `hashkey`, so every packet goes to bucket 0")
    } else {
        format!(
            "the packets it can match hash to bucket {first:x} (`hashkey mask 0x{:08x} at {}` of the \
             node linking to {table:x}:)",
            l.sel.hmask, l.sel.hoff
        )
    };
    let class = n
        .classid
        .map(|c| format!(": its class {} gets nothing through it", Handle(c)))
        .unwrap_or_default();
    let fix = if l.sel.hmask == 0 {
        format!("give the linking filter a `hashkey` (`hashkey mask 0x000000ff at 16` hashes the last byte of the destination address), or put the node in bucket 0 (`ht {table:x}:0:`)")
    } else {
        format!("add it with `ht {table:x}:{first:x}:` (tc reads the bucket in hex)")
    };
    Some(
        Finding::new(
            "u32-bucket",
            format!("{} filter parent {parent} u32 fh {fh}", cx.name),
            format!("sits in bucket {bucket:x} of hash table {table:x}:, but {how}: it never matches{class}"),
            fix,
        )
        .line(line(cx, table, bucket, n)),
    )
}

/// The line that added `n`: a u32 filter line of the device with `ht TABLE:BUCKET:` (the one naming
/// `n`'s class when there are several).
fn line<'o>(cx: &DevCx<'o>, table: u32, bucket: usize, n: &Knode) -> Option<&'o str> {
    let ht = |rest: &[String]| {
        let i = rest.iter().position(|w| w == "ht")?;
        let mut parts = rest.get(i + 1)?.split(':');
        let t = u32::from_str_radix(parts.next()?, 16).ok()?;
        let b = u32::from_str_radix(parts.next().filter(|b| !b.is_empty())?, 16).ok()?;
        Some((t, b))
    };
    let lines: Vec<_> = cx
        .origins
        .filter_lines()
        .filter(|(_, l)| l.kind == Some("u32") && l.dev == Some(cx.name))
        .filter(|(_, l)| ht(l.rest) == Some((table, bucket as u32)))
        .collect();
    lines
        .iter()
        .find(|(_, l)| n.classid.is_some() && l.flowid() == n.classid)
        .or(lines.first())
        .map(|(r, _)| r.at.as_str())
}
