//! u32 keys written with value bits outside their mask: `match ip dport 22 0xff00` or `match u32
//! 0x0a000105 0xffffff00 at 16`. tc keeps only the bits the mask covers (iproute2's f_u32.c,
//! `pack_key`: `key &= mask`) without a word, so the filter matches what the masked value says (port
//! 0 in the high byte: every port from 0 to 255; the whole 10.0.1.0/24), not what the admin wrote.
//! Read from the filter lines' words, since the policy keeps only the masked key.

use super::{DevCx, Finding};
use crate::util::{get_u32, matches};

/// The selectors whose `VALUE MASK` words follow (`parse_u32`/`parse_u16`/`parse_u8` in f_u32.c, as
/// `parse_selector` reads them behind `match`): the field's width in bits and where its value is
/// among the selector's words.
fn width(sel: &[&str]) -> Option<(u32, usize)> {
    let w = |i: usize| sel.get(i).copied().unwrap_or("");
    let field = |fields: &[(&str, u32)]| {
        let f = w(1);
        fields
            .iter()
            .find(|(name, _)| {
                f == *name || (matches(f, name) && matches!(*name, "dsfield" | "precedence"))
            })
            .map(|&(_, b)| (b, 2))
    };
    match w(0) {
        s if matches(s, "u32") => Some((32, 1)),
        s if matches(s, "u16") => Some((16, 1)),
        s if matches(s, "u8") => Some((8, 1)),
        "ip" => field(&[
            ("tos", 8),
            ("dsfield", 8),
            ("precedence", 8),
            ("ihl", 8),
            ("protocol", 8),
            ("dport", 16),
            ("sport", 16),
            ("icmp_type", 8),
            ("icmp_code", 8),
        ]),
        "ip6" => field(&[
            ("protocol", 8),
            ("flowlabel", 32),
            ("dport", 16),
            ("sport", 16),
            ("icmp_type", 8),
            ("icmp_code", 8),
        ]),
        s if matches(s, "udp") || matches(s, "tcp") => field(&[("src", 16), ("dst", 16)]),
        s if matches(s, "icmp") => field(&[("type", 8), ("code", 8)]),
        _ => None,
    }
}

pub(super) fn check(cx: &DevCx, out: &mut Vec<Finding>) {
    for (record, l) in cx.origins.filter_lines() {
        if l.kind != Some("u32") || l.dev != Some(cx.name) {
            continue;
        }
        let rest: Vec<&str> = l.rest.iter().map(String::as_str).collect();
        for (i, _) in rest.iter().enumerate().filter(|(_, w)| **w == "match") {
            let sel = &rest[i + 1..];
            let Some((bits, at)) = width(sel) else {
                continue;
            };
            let (Some(v), Some(m)) = (sel.get(at), sel.get(at + 1)) else {
                continue;
            };
            // tc reads the value in any base and the mask as hex (`get_u32(&mask, *argv, 16)`).
            let (Some(value), Some(mask)) = (get_u32(v, 0), get_u32(m, 16)) else {
                continue;
            };
            let limit = if bits == 32 {
                u32::MAX
            } else {
                (1 << bits) - 1
            };
            // A value or mask wider than the field is refused by tc: that is `refused`'s finding.
            if value > limit || mask > limit || value & !mask == 0 {
                continue;
            }
            let written = rest[i..(i + 1 + at + 2).min(rest.len())].join(" ");
            let digits = (bits / 4) as usize;
            out.push(
                Finding::new(
                    "u32-value-masked",
                    format!(
                        "{} filter parent {} pref {} u32",
                        cx.name,
                        l.parent.map_or("root".to_string(), |p| tclab_core::Handle(p).to_string()),
                        l.pref.map_or("?".to_string(), |p| p.to_string())
                    ),
                    format!(
                        "`{written}`: the value 0x{value:0digits$x} has bits outside the mask \
                         0x{mask:0digits$x}, which tc drops without a word (f_u32.c's pack_key: key &= \
                         mask): the filter matches 0x{:0digits$x} under that mask, not {v}",
                        value & mask
                    ),
                    format!(
                        "write the mask that covers the value (0x{limit:0digits$x} for the whole field), \
                         or the value within the mask (0x{:0digits$x}) if that is what is meant",
                        value & mask
                    ),
                )
                .line(Some(&record.at)),
            );
        }
    }
}
