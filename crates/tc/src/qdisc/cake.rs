//! `cake` (iproute2's `q_cake.c`): the shaper's rate, the RTT presets, the diffserv and isolation modes,
//! the overhead keywords of DSL, DOCSIS and Ethernet framings, the ACK filter; the qdisc's counters and
//! per-tin table, and each queue's counters under `-s`.

use super::codel::signed_time;
use super::{ClassLang, QdiscLang};
use crate::action::duparg;
use crate::util::{get_rate, get_size, get_time, get_u32, sprint_rate, sprint_size, sprint_time};
use crate::{Failure, Result, ShowFlags};
use serde_json::{json, Map, Value};
use std::fmt::Write;
use tclab_core::qdisc::cake::{ack, atm, diffserv, flow_mode, CakeOptions};
use tclab_core::qdisc::{ClassInfo, DevEnv, QdiscOptions, Xstats};

pub const LANG: QdiscLang = QdiscLang {
    name: "cake",
    words: WORDS,
    parse,
    print,
    xstats: Some(print_xstats),
    xstats_json: Some(xstats_json),
    class: Some(ClassLang {
        parse: |_, _| {
            Err(Failure::kernel(tclab_core::KernelError::new(
                tclab_core::error::Errno::NotSupported,
            )))
        },
        print: |_, _, _| {},
        print_xstats: print_flow_xstats,
    }),
};

const WORDS: &[&str] = &[
    "bandwidth",
    "unlimited",
    "autorate-ingress",
    "rtt",
    "datacentre",
    "lan",
    "metro",
    "regional",
    "internet",
    "oceanic",
    "satellite",
    "interplanetary",
    "besteffort",
    "precedence",
    "diffserv8",
    "diffserv4",
    "diffserv",
    "diffserv3",
    "nowash",
    "wash",
    "split-gso",
    "no-split-gso",
    "flowblind",
    "srchost",
    "dsthost",
    "hosts",
    "flows",
    "dual-srchost",
    "dual-dsthost",
    "triple-isolate",
    "nat",
    "nonat",
    "ptm",
    "atm",
    "noatm",
    "raw",
    "conservative",
    "ipoa-vcmux",
    "ipoa-llcsnap",
    "bridged-vcmux",
    "bridged-llcsnap",
    "pppoa-vcmux",
    "pppoa-llc",
    "pppoe-vcmux",
    "pppoe-llcsnap",
    "pppoe-ptm",
    "bridged-ptm",
    "via-ethernet",
    "ethernet",
    "ether-vlan",
    "docsis",
    "overhead",
    "mpu",
    "ingress",
    "egress",
    "no-ack-filter",
    "ack-filter",
    "ack-filter-aggressive",
    "memlimit",
    "fwmark",
];

const USAGE: &str = "Usage: ... cake [ bandwidth RATE | unlimited* | autorate-ingress ]\n                [ rtt TIME | datacentre | lan | metro | regional |\n                  internet* | oceanic | satellite | interplanetary ]\n                [ besteffort | diffserv8 | diffserv4 | diffserv3* ]\n                [ flowblind | srchost | dsthost | hosts | flows |\n                  dual-srchost | dual-dsthost | triple-isolate* ]\n                [ nat | nonat* ]\n                [ wash | nowash* ]\n                [ split-gso* | no-split-gso ]\n                [ ack-filter | ack-filter-aggressive | no-ack-filter* ]\n                [ memlimit LIMIT ]\n                [ fwmark MASK ]\n                [ ptm | atm | noatm* ] [ overhead N | conservative | raw* ]\n                [ mpu N ] [ ingress | egress* ]\n                (* marks defaults)";

/// The RTT presets: (name, target µs, interval µs).
const PRESETS: &[(&str, u32, u32)] = &[
    ("datacentre", 5, 100),
    ("lan", 50, 1000),
    ("metro", 500, 10000),
    ("regional", 1500, 30000),
    ("internet", 5000, 100000),
    ("oceanic", 15000, 300000),
    ("satellite", 50000, 1000000),
    ("interplanetary", 50000000, 1000000000),
];

/// The overhead keywords that add to the overhead: (name, ATM mode, bytes).
const FRAMINGS: &[(&str, Option<u32>, i32)] = &[
    ("ipoa-vcmux", Some(atm::ATM), 8),
    ("ipoa-llcsnap", Some(atm::ATM), 16),
    ("bridged-vcmux", Some(atm::ATM), 24),
    ("bridged-llcsnap", Some(atm::ATM), 32),
    ("pppoa-vcmux", Some(atm::ATM), 10),
    ("pppoa-llc", Some(atm::ATM), 14),
    ("pppoe-vcmux", Some(atm::ATM), 32),
    ("pppoe-llcsnap", Some(atm::ATM), 40),
    // VDSL2 over PTM: PPP, PPPoE, MACs, ethertype, FCS, start/end of frame, TC-CRC.
    ("pppoe-ptm", Some(atm::PTM), 30),
    ("bridged-ptm", Some(atm::PTM), 22),
    // An 802.1q tag; may be repeated.
    ("ether-vlan", None, 4),
];

const DIFFSERV_NAMES: [&str; 5] = [
    "diffserv3",
    "diffserv4",
    "diffserv8",
    "besteffort",
    "precedence",
];
const FLOWMODE_NAMES: [&str; 8] = [
    "flowblind",
    "srchost",
    "dsthost",
    "hosts",
    "flows",
    "dual-srchost",
    "dual-dsthost",
    "triple-isolate",
];

/// `strtol(s, &p, 10)` with `!p || *p` refused: the whole word a decimal integer (an empty word is 0).
fn strtol10(s: &str) -> Option<i64> {
    let t = s.trim_start();
    let (neg, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    if digits.is_empty() {
        return if t.is_empty() { Some(0) } else { None };
    }
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let v: i64 = digits.parse().unwrap_or(i64::MAX);
    Some(if neg { -v } else { v })
}

/// `cake_parse_opt` (tc 6.1).
fn parse(_kind: &str, args: &[String], _env: Option<DevEnv>) -> Result<QdiscOptions> {
    let mut it = crate::Cur::new(args);
    let mut o = CakeOptions::default();
    let (mut bandwidth, mut unlimited) = (0u64, false);
    let (mut interval, mut target) = (0u32, 0u32);
    let mut preset_set: Option<&str> = None;
    let (mut overhead, mut overhead_set, mut overhead_override) = (0i32, false, false);
    let mut mpu = 0i64;
    let (mut memlimit, mut fwmark) = (0u32, 0u32);
    while let Some(a) = it.next() {
        if let Some(&(name, t, i)) = PRESETS.iter().find(|p| p.0 == a) {
            if let Some(first) = preset_set {
                return Err(duparg(a, first));
            }
            preset_set = Some(name);
            target = t;
            interval = i;
            continue;
        }
        if let Some(&(_, mode, bytes)) = FRAMINGS.iter().find(|f| f.0 == a) {
            if mode.is_some() {
                o.atm = mode;
            }
            overhead += bytes;
            overhead_set = true;
            continue;
        }
        match a {
            "bandwidth" => {
                bandwidth = get_rate(it.value()?)
                    .ok_or_else(|| Failure::options("Illegal \"bandwidth\""))?;
                unlimited = false;
                o.autorate = Some(0);
            }
            "unlimited" => {
                bandwidth = 0;
                unlimited = true;
                o.autorate = Some(0);
            }
            "autorate-ingress" => o.autorate = Some(1),
            "rtt" => {
                interval =
                    get_time(it.value()?).ok_or_else(|| Failure::options("Illegal \"rtt\""))?;
                target = (interval / 20).max(1);
            }
            "besteffort" => o.diffserv_mode = Some(diffserv::BESTEFFORT),
            "precedence" => o.diffserv_mode = Some(diffserv::PRECEDENCE),
            "diffserv8" => o.diffserv_mode = Some(diffserv::DIFFSERV8),
            "diffserv4" | "diffserv" => o.diffserv_mode = Some(diffserv::DIFFSERV4),
            "diffserv3" => o.diffserv_mode = Some(diffserv::DIFFSERV3),
            "nowash" => o.wash = Some(0),
            "wash" => o.wash = Some(1),
            "split-gso" => o.split_gso = Some(1),
            "no-split-gso" => o.split_gso = Some(0),
            "flowblind" => o.flow_mode = Some(flow_mode::NONE),
            "srchost" => o.flow_mode = Some(flow_mode::SRC_IP),
            "dsthost" => o.flow_mode = Some(flow_mode::DST_IP),
            "hosts" => o.flow_mode = Some(flow_mode::HOSTS),
            "flows" => o.flow_mode = Some(flow_mode::FLOWS),
            "dual-srchost" => o.flow_mode = Some(flow_mode::DUAL_SRC),
            "dual-dsthost" => o.flow_mode = Some(flow_mode::DUAL_DST),
            "triple-isolate" => o.flow_mode = Some(flow_mode::TRIPLE),
            "nat" => o.nat = Some(1),
            "nonat" => o.nat = Some(0),
            "ptm" => o.atm = Some(atm::PTM),
            "atm" => o.atm = Some(atm::ATM),
            "noatm" => o.atm = Some(atm::NONE),
            "raw" => {
                o.atm = Some(atm::NONE);
                overhead = 0;
                overhead_set = true;
                overhead_override = true;
            }
            "conservative" => {
                // One whole ATM cell plus ATM framing: safe when the real overhead is unknown.
                o.atm = Some(atm::ATM);
                overhead = 48;
                overhead_set = true;
            }
            // Compensated automatically now; kept so old scripts still parse.
            "via-ethernet" => {}
            "ethernet" => {
                // Preamble, inter-frame gap and FCS.
                overhead += 38;
                overhead_set = true;
                mpu = 84;
            }
            "docsis" => {
                // DOCSIS shapers count the frame with FCS, not the gap or preamble.
                o.atm = Some(atm::NONE);
                overhead += 18;
                overhead_set = true;
                mpu = 64;
            }
            "overhead" => {
                overhead = strtol10(it.value()?)
                    .filter(|v| (-64..=256).contains(v))
                    .ok_or_else(|| {
                        // tc's message ends with a literal backslash-n.
                        Failure::options("Illegal \"overhead\", valid range is -64 to 256\\n")
                    })? as i32;
                overhead_set = true;
            }
            "mpu" => {
                mpu = strtol10(it.value()?)
                    .filter(|v| (0..=256).contains(v))
                    .ok_or_else(|| {
                        Failure::options("Illegal \"mpu\", valid range is 0 to 256\\n")
                    })?;
            }
            "ingress" => o.ingress = Some(1),
            "egress" => o.ingress = Some(0),
            "no-ack-filter" => o.ack_filter = Some(ack::NONE),
            "ack-filter" => o.ack_filter = Some(ack::FILTER),
            "ack-filter-aggressive" => o.ack_filter = Some(ack::AGGRESSIVE),
            "memlimit" => {
                let v = it.value()?;
                memlimit = get_size(v).ok_or_else(|| {
                    Failure::options(format!("Illegal value for \"memlimit\": \"{v}\""))
                })?;
            }
            "fwmark" => {
                let v = it.value()?;
                fwmark = get_u32(v, 0).ok_or_else(|| {
                    Failure::options(format!("Illegal value for \"fwmark\": \"{v}\""))
                })?;
            }
            "help" => return Err(Failure::options(USAGE)),
            _ => return Err(Failure::options(format!("What is \"{a}\"?\n{USAGE}"))),
        }
    }
    if bandwidth != 0 || unlimited {
        o.base_rate = Some(bandwidth);
    }
    o.overhead = overhead_set.then_some(overhead);
    o.raw = overhead_override;
    o.mpu = (mpu > 0).then_some(mpu as u32);
    o.rtt = (interval != 0).then_some(interval);
    o.target = (target != 0).then_some(target);
    o.memory = (memlimit != 0).then_some(memlimit);
    o.fwmark = (fwmark != 0).then_some(fwmark);
    Ok(QdiscOptions::Cake(o))
}

/// `cake_print_mode`: a known mode's name, or `(?key?)`.
fn print_mode(v: u32, names: &[&str], key: &str, s: &mut String, j: &mut Map<String, Value>) {
    match names.get(v as usize) {
        Some(n) => {
            let _ = write!(s, "{n} ");
            j.insert(key.into(), json!(n));
        }
        None => {
            let _ = write!(s, "(?{key}?)");
            j.insert(key.into(), json!("unknown"));
        }
    }
}

/// `cake_print_opt`.
fn print(o: &QdiscOptions, _flags: ShowFlags, s: &mut String, j: &mut Map<String, Value>) {
    let QdiscOptions::Cake(o) = o else { return };
    match o.base_rate {
        Some(0) => {
            s.push_str("bandwidth unlimited ");
            j.insert("bandwidth".into(), json!("unlimited"));
        }
        Some(r) => {
            let _ = write!(s, "bandwidth {} ", sprint_rate(r));
            j.insert("bandwidth".into(), json!(r));
        }
        None => {}
    }
    match o.autorate {
        Some(1) => {
            s.push_str("autorate-ingress ");
            j.insert("autorate".into(), json!("autorate-ingress"));
        }
        Some(0) | None => {}
        Some(_) => {
            s.push_str("(?autorate?) ");
            j.insert("autorate".into(), json!("unknown"));
        }
    }
    if let Some(d) = o.diffserv_mode {
        print_mode(d, &DIFFSERV_NAMES, "diffserv", s, j);
    }
    if let Some(f) = o.flow_mode {
        print_mode(f, &FLOWMODE_NAMES, "flowmode", s, j);
    }
    let flag = |v: Option<u32>| v.unwrap_or(0) != 0;
    let nat = flag(o.nat);
    s.push_str(if nat { "nat " } else { "nonat " });
    j.insert("nat".into(), json!(nat));
    let wash = flag(o.wash);
    s.push_str(if wash { "wash " } else { "nowash " });
    j.insert("wash".into(), json!(wash));
    let ingress = flag(o.ingress);
    if ingress {
        s.push_str("ingress ");
    }
    j.insert("ingress".into(), json!(ingress));
    let (text, value) = match o.ack_filter.unwrap_or(0) {
        ack::AGGRESSIVE => ("ack-filter-aggressive ", "aggressive"),
        ack::FILTER => ("ack-filter ", "enabled"),
        _ => ("no-ack-filter ", "disabled"),
    };
    s.push_str(text);
    j.insert("ack-filter".into(), json!(value));
    let split = flag(o.split_gso);
    s.push_str(if split { "split-gso " } else { "no-split-gso " });
    j.insert("split_gso".into(), json!(split));
    let interval = o.rtt.unwrap_or(0);
    if interval != 0 {
        let _ = write!(s, "rtt {} ", sprint_time(interval));
    }
    j.insert("rtt".into(), json!(interval));
    if o.raw {
        s.push_str("raw ");
    }
    j.insert("raw".into(), json!(o.raw));
    let atm_word = match o.atm.unwrap_or(0) {
        atm::ATM => Some("atm"),
        atm::PTM => Some("ptm"),
        _ if !o.raw => Some("noatm"),
        _ => None,
    };
    if let Some(w) = atm_word {
        let _ = write!(s, "{w} ");
        j.insert("atm".into(), json!(w));
    }
    let overhead = o.overhead.unwrap_or(0);
    let _ = write!(s, "overhead {overhead} ");
    j.insert("overhead".into(), json!(overhead));
    if let Some(m) = o.mpu.filter(|m| *m != 0) {
        let _ = write!(s, "mpu {m} ");
        j.insert("mpu".into(), json!(m));
    }
    if let Some(m) = o.memory.filter(|m| *m != 0) {
        let _ = write!(s, "memlimit {} ", sprint_size(m));
        j.insert("memlimit".into(), json!(m));
    }
    let fwmark = o.fwmark.unwrap_or(0);
    if fwmark != 0 {
        let _ = write!(s, "fwmark {fwmark:#x} ");
    }
    // print_0xhex: `%#llx`, which writes 0 without the prefix.
    let hex = if fwmark == 0 {
        "0".to_string()
    } else {
        format!("{fwmark:#x}")
    };
    j.insert("fwmark".into(), json!(hex));
}

/// `cake_print_xstats` for the qdisc: memory, capacity estimate, packet sizes, then one column per tin.
fn print_xstats(x: &Xstats, out: &mut String) {
    let Xstats::Cake(x) = x else { return };
    let _ = writeln!(
        out,
        " memory used: {} of {}",
        sprint_size(x.memory_used),
        sprint_size(x.memory_limit)
    );
    let _ = writeln!(
        out,
        " capacity estimate: {}",
        sprint_rate(x.capacity_estimate)
    );
    let _ = writeln!(
        out,
        " min/max network layer size: {:>12} /{:>8}",
        x.min_netlen, x.max_netlen
    );
    let _ = writeln!(
        out,
        " min/max overhead-adjusted size: {:>8} /{:>8}",
        x.min_adjlen, x.max_adjlen
    );
    let _ = writeln!(out, " average network hdr offset: {:>12}\n", x.avg_netoff);
    let tins = &x.tins[..x.tin_count];
    if tins.is_empty() {
        out.push('\n');
        return;
    }
    match tins.len() {
        3 => out.push_str("                   Bulk  Best Effort        Voice\n"),
        4 => out.push_str("                   Bulk  Best Effort        Video        Voice\n"),
        n => {
            out.push_str("          ");
            for i in 0..n {
                let _ = write!(out, "        Tin {i}");
            }
            out.push('\n');
        }
    }
    let mut row = |name: &str, cell: &dyn Fn(&tclab_core::qdisc::cake::CakeTinXstats) -> String| {
        out.push_str(name);
        for t in tins {
            let _ = write!(out, " {:>12}", cell(t));
        }
        out.push('\n');
    };
    row("  thresh  ", &|t| sprint_rate(t.threshold_rate));
    row("  target  ", &|t| sprint_time(t.target_us));
    row("  interval", &|t| sprint_time(t.interval_us));
    row("  pk_delay", &|t| sprint_time(t.peak_delay_us));
    row("  av_delay", &|t| sprint_time(t.avg_delay_us));
    row("  sp_delay", &|t| sprint_time(t.base_delay_us));
    row("  backlog ", &|t| sprint_size(t.backlog_bytes));
    row("  pkts    ", &|t| t.sent_packets.to_string());
    row("  bytes   ", &|t| t.sent_bytes.to_string());
    row("  way_inds", &|t| t.way_indirect_hits.to_string());
    row("  way_miss", &|t| t.way_misses.to_string());
    row("  way_cols", &|t| t.way_collisions.to_string());
    row("  drops   ", &|t| t.dropped_packets.to_string());
    row("  marks   ", &|t| t.ecn_marked_packets.to_string());
    row("  ack_drop", &|t| t.acks_dropped_packets.to_string());
    row("  sp_flows", &|t| t.sparse_flows.to_string());
    row("  bk_flows", &|t| t.bulk_flows.to_string());
    row("  un_flows", &|t| t.unresponsive_flows.to_string());
    row("  max_len ", &|t| t.max_skblen.to_string());
    row("  quantum ", &|t| t.flow_quantum.to_string());
    out.push('\n');
}

/// `cake_print_xstats` and `cake_print_json_tin` under JSON: the qdisc's counters and a `tins` array.
fn xstats_json(x: &Xstats, m: &mut Map<String, Value>) {
    let Xstats::Cake(x) = x else { return };
    m.insert("memory_used".into(), json!(x.memory_used));
    m.insert("memory_limit".into(), json!(x.memory_limit));
    m.insert("capacity_estimate".into(), json!(x.capacity_estimate));
    m.insert("min_network_size".into(), json!(x.min_netlen));
    m.insert("max_network_size".into(), json!(x.max_netlen));
    m.insert("min_adj_size".into(), json!(x.min_adjlen));
    m.insert("max_adj_size".into(), json!(x.max_adjlen));
    m.insert("avg_hdr_offset".into(), json!(x.avg_netoff));
    let tins: Vec<Value> = x.tins[..x.tin_count]
        .iter()
        .map(|t| {
            json!({
                "threshold_rate": t.threshold_rate,
                "sent_bytes": t.sent_bytes,
                "backlog_bytes": t.backlog_bytes,
                "target_us": t.target_us,
                "interval_us": t.interval_us,
                "peak_delay_us": t.peak_delay_us,
                "avg_delay_us": t.avg_delay_us,
                "base_delay_us": t.base_delay_us,
                "sent_packets": t.sent_packets,
                "way_indirect_hits": t.way_indirect_hits,
                "way_misses": t.way_misses,
                "way_collisions": t.way_collisions,
                "drops": t.dropped_packets,
                "ecn_mark": t.ecn_marked_packets,
                "ack_drops": t.acks_dropped_packets,
                "sparse_flows": t.sparse_flows,
                "bulk_flows": t.bulk_flows,
                "unresponsive_flows": t.unresponsive_flows,
                "max_pkt_len": t.max_skblen,
                "flow_quantum": t.flow_quantum,
            })
        })
        .collect();
    m.insert("tins".into(), Value::Array(tins));
}

/// `cake_print_xstats` for one queue (a class).
fn print_flow_xstats(c: &ClassInfo, out: &mut String) {
    let Some(Xstats::CakeFlow(x)) = &c.xstats else {
        return;
    };
    let _ = write!(out, "  deficit {} count {}", x.deficit, x.count);
    if x.dropping {
        out.push_str(" dropping");
        if let Some(d) = x.drop_next_us {
            let _ = write!(out, " drop_next {}", signed_time(d));
        }
    }
    let _ = write!(out, " blue_prob {}", x.p_drop);
    if let Some(b) = x.blue_timer_us {
        let _ = write!(out, " blue_timer {}", signed_time(b));
    }
    out.push('\n');
}
