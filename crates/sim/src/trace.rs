//! The per-packet decision trace (`tclab sim SCENARIO --trace FILE`): every enqueue on an egress qdisc
//! (with its verdict), every dequeue (with the packet's sojourn in the tree), every drop (with its reason,
//! as the engine names it: tail drop, overlimit, AQM, action…) and every packet an ingress action dropped,
//! one text line each, streamed to a file as the run goes, in virtual-time order. Same scenario and seed,
//! same trace, byte for byte.
//!
//! ```text
//! # tclab trace 2
//! # flow download tcp 32768-32771
//! # time_ns dev event flow len class reason sojourn_ns filter
//! 1000523040 router:eth1 enq download 1514 1:20 ok - u32:1
//! 1000523040 router:eth1 deq download 1514 1:20 - 0 -
//! 1201000000 router:eth1 drop download 1514 1:20 tail_drop - -
//! ```
//!
//! `flow` is the traffic entry a packet belongs to (by its source port, or ICMP identifier), with `<` for
//! the reverse direction (a TCP download's ACKs: `download<`), `-` if none. `class` is the leaf class the
//! innermost classful qdisc (HTB, HFSC, CBQ, DRR, QFQ, PRIO, ETS) queued it in (`-` under a classless
//! root). `reason` is the enqueue's verdict (`ok`, `cn`, `drop`,
//! `stolen`) or the drop's reason; `sojourn_ns` the time since the packet entered the root qdisc, for
//! dequeues and for queued packets dropped later; `filter`, on enqueue lines, the filter instance that
//! classified the packet last on its way down (`kind:pref`, `@chain` outside chain 0; `-` if none did:
//! a default class, skb->priority, a classless root). Version 1 traces (without `filter`) are read too. `tclab trace stats|show|plot` read it back.

use std::collections::BTreeMap;
use std::io::Write;
use tclab_core::qdisc::{DropReason, Verdict};
use tclab_core::{Nanos, Packet};

pub const HEADER: &str = "# time_ns dev event flow len class reason sojourn_ns filter";

/// A trace being written.
pub struct Trace {
    out: Box<dyn Write>,
    /// (IP protocol, source port or ICMP identifier) → traffic entry.
    flows: BTreeMap<(u8, u16), String>,
    /// The first write error, reported when the run ends.
    pub error: Option<std::io::Error>,
    pub lines: u64,
}

/// What happened to a packet.
pub enum Event {
    /// Queued (or refused) by the root qdisc, and the filter that classified it last, if any.
    Enqueue(Verdict, Option<tclab_core::filter::FilterMatch>),
    Dequeue,
    /// Dropped by a qdisc: the reason, and whether it was the arriving packet.
    Drop(DropReason, bool),
    /// Dropped by an ingress action.
    RxDrop,
}

impl Trace {
    /// A trace into `out`. Its header is written by [`Trace::begin`], once the traffic is known.
    pub fn new(out: Box<dyn Write>) -> Trace {
        Trace {
            out,
            flows: BTreeMap::new(),
            error: None,
            lines: 0,
        }
    }

    /// Write the header: each traffic entry's name, protocol (6, 17, 1) and source ports (or ICMP
    /// identifiers), by which packets are told apart.
    pub fn begin(&mut self, flows: &[(String, u8, Vec<u16>)]) {
        let mut head = String::from("# tclab trace 2\n");
        for (name, proto, ports) in flows {
            let kind = match proto {
                6 => "tcp",
                17 => "udp",
                _ => "icmp",
            };
            let range = match (ports.first(), ports.last()) {
                (Some(a), Some(b)) if a != b => format!("{a}-{b}"),
                (Some(a), _) => a.to_string(),
                _ => "-".into(),
            };
            head.push_str(&format!("# flow {name} {kind} {range}\n"));
            for &p in ports {
                self.flows.insert((*proto, p), name.clone());
            }
        }
        head.push_str(HEADER);
        head.push('\n');
        if let Err(e) = self.out.write_all(head.as_bytes()) {
            self.error = Some(e);
        }
    }

    /// The traffic entry of a packet, `<` appended for the reverse direction.
    fn flow_of(&self, pkt: &Packet) -> String {
        let d = &pkt.data;
        if d.len() < 20 || d[0] >> 4 != 4 {
            return "-".into();
        }
        let ihl = (d[0] & 0x0f) as usize * 4;
        let proto = d[9];
        let word = |at: usize| d.get(at..at + 2).map(|b| u16::from_be_bytes([b[0], b[1]]));
        match proto {
            6 | 17 => {
                let (Some(sport), Some(dport)) = (word(ihl), word(ihl + 2)) else {
                    return "-".into();
                };
                if let Some(n) = self.flows.get(&(proto, sport)) {
                    n.clone()
                } else if let Some(n) = self.flows.get(&(proto, dport)) {
                    format!("{n}<")
                } else {
                    "-".into()
                }
            }
            1 => match (d.get(ihl), word(ihl + 4)) {
                (Some(&kind), Some(id)) => match self.flows.get(&(1, id)) {
                    Some(n) if kind == 0 => format!("{n}<"),
                    Some(n) => n.clone(),
                    None => "-".into(),
                },
                _ => "-".into(),
            },
            _ => "-".into(),
        }
    }

    pub fn record(&mut self, now: Nanos, dev: &str, ev: Event, pkt: &Packet) {
        if self.error.is_some() {
            return;
        }
        let class = if pkt.leaf_class == 0 {
            "-".to_string()
        } else {
            tclab_core::Handle(pkt.leaf_class).to_string()
        };
        let sojourn = now.saturating_sub(pkt.enqueue_ns).to_string();
        let filter = match &ev {
            Event::Enqueue(_, Some(m)) => m.to_string(),
            _ => "-".to_string(),
        };
        let (event, reason, sojourn) = match ev {
            Event::Enqueue(v, _) => (
                "enq",
                match v {
                    Verdict::Success => "ok",
                    Verdict::Cn => "cn",
                    Verdict::Drop => "drop",
                    Verdict::Stolen => "stolen",
                    Verdict::Bypass => "bypass",
                },
                "-".to_string(),
            ),
            Event::Dequeue => ("deq", "-", sojourn),
            Event::Drop(r, arriving) => (
                "drop",
                r.name(),
                if arriving { "-".into() } else { sojourn },
            ),
            Event::RxDrop => ("rxdrop", DropReason::Action.name(), "-".into()),
        };
        let line = format!(
            "{now} {dev} {event} {} {} {class} {reason} {sojourn} {filter}\n",
            self.flow_of(pkt),
            pkt.wire_len.unwrap_or(pkt.len)
        );
        if let Err(e) = self.out.write_all(line.as_bytes()) {
            self.error = Some(e);
        }
        self.lines += 1;
    }

    pub fn finish(&mut self) -> Result<u64, String> {
        if let Some(e) = self.error.take() {
            return Err(format!("the trace could not be written: {e}"));
        }
        self.out
            .flush()
            .map_err(|e| format!("the trace could not be written: {e}"))?;
        Ok(self.lines)
    }
}

/// One line of a trace, read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    pub time: Nanos,
    pub dev: String,
    pub event: String,
    pub flow: String,
    pub len: u32,
    pub class: String,
    pub reason: String,
    pub sojourn: Option<Nanos>,
    /// The classifying filter of an enqueue (`u32:1`), else `-`.
    pub filter: String,
}

/// Parse one line (not a comment); `None` for a line that is not a trace line.
pub fn parse_line(l: &str) -> Option<Line> {
    let w: Vec<&str> = l.split(' ').collect();
    if !(w.len() == 8 || w.len() == 9) || l.starts_with('#') {
        return None;
    }
    Some(Line {
        time: w[0].parse().ok()?,
        dev: w[1].to_string(),
        event: w[2].to_string(),
        flow: w[3].to_string(),
        len: w[4].parse().ok()?,
        class: w[5].to_string(),
        reason: w[6].to_string(),
        sojourn: w[7].parse().ok(),
        filter: w.get(8).unwrap_or(&"-").to_string(),
    })
}
