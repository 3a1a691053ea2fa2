//! Scenarios shipped with tclab: `tclab sim NAME` runs one, `tclab sim --show NAME` prints its file.
//!
//! A built-in scenario is the concatenation of TOML parts from `crates/sim/scenarios/`, so that seed 004's
//! lab, its conditioner and its traffic are each written once, or, for the ISP benchmark whose policy has a
//! class, a leaf and a filter per subscriber, a file written by a function.

use std::fmt::Write;
use Source::{Generated, Parts};

pub struct Builtin {
    pub name: &'static str,
    pub description: &'static str,
    source: Source,
}

enum Source {
    Parts(&'static [&'static str]),
    Generated(fn() -> String),
}

impl Builtin {
    /// The scenario file.
    pub fn toml(&self) -> String {
        match self.source {
            Parts(parts) => parts.concat(),
            Generated(f) => f(),
        }
    }
}

/// The ISP benchmarks' lab: the internet's side on a link of `uplink`, the subscribers' on a link of
/// `line` (`line_extra`: more of that link's keys), up to the router's policy's opening line.
fn isp_lab(uplink: &str, line: &str, line_extra: &str) -> String {
    format!(
        r#"[[node]]
name = "internet"

[[node]]
name = "router"
kind = "router"

[[node]]
name = "subscribers"

[[link]]
a = "internet:eth0"
b = "router:eth0"
rate = "{uplink}"
delay = "5ms"

[[link]]
a = "router:eth1"
b = "subscribers:eth0"
rate = "{line}"
delay = "1ms"
{line_extra}
[[policy]]
node = "router"
tc = """
"#
    )
}

/// The ISP benchmarks' ping, beside the downloads.
const ISP_PING: &str = r#"
[[traffic]]
name = "ping"
kind = "ping"
from = "internet"
to = "subscribers"
interval = "100ms"
"#;

/// The ISP benchmark (issue 26): a 1 Gbit/s line to `subscribers` subscribers, each an HTB class of rate
/// 1 mbit and ceil 20 mbit with an fq_codel leaf, found by u32 filters hashed on the destination port
/// (a 256-bucket table keyed by the port's low byte, so about subscribers/256 filters a bucket), one CUBIC
/// download per subscriber. Subscriber i's class is 1:(100 + i) in hex, its leaf (100 + i):, its port
/// 10000 + i; the default class 1:2 carries the ping.
fn isp(subscribers: u32) -> String {
    let mut s = format!(
        r#"# The ISP benchmark (issue 26): what a LibreQoS box shapes, {subscribers} subscribers behind one 1 Gbit/s
# line. `cargo bench -p tclab-sim` runs it and reports events/s, frames/s, speed over real time and peak
# memory. Written by crates/sim/src/builtin.rs (`isp`).
name = "benchmark: {subscribers} subscribers, HTB + fq_codel each, hashed u32, 1 Gbit/s"
seed = 1
duration = "10s"
sample = "500ms"

{lab}qdisc add dev eth1 root handle 1: htb default 2
class add dev eth1 parent 1: classid 1:1 htb rate 1gbit ceil 1gbit quantum 3028
class add dev eth1 parent 1:1 classid 1:2 htb rate 1mbit ceil 20mbit
filter add dev eth1 parent 1: prio 5 handle 2: protocol ip u32 divisor 256
filter add dev eth1 parent 1: prio 5 protocol ip u32 ht 800:: match ip protocol 6 0xff hashkey mask 0x000000ff at 20 link 2:
"#,
        lab = isp_lab("10gbit", "1gbit", "")
    );
    for i in 0..subscribers {
        let (id, port) = (0x100 + i, 10000 + i);
        let _ = writeln!(
            s,
            "class add dev eth1 parent 1:1 classid 1:{id:x} htb rate 1mbit ceil 20mbit\n\
             qdisc add dev eth1 parent 1:{id:x} handle {id:x}: fq_codel\n\
             filter add dev eth1 parent 1: prio 5 protocol ip u32 ht 2:{:x}: match ip dport {port} 0xffff flowid 1:{id:x}",
            port & 0xff
        );
    }
    let _ = write!(
        s,
        r#""""

[[traffic]]
name = "downloads"
kind = "tcp"
from = "internet"
to = "subscribers"
port = 10000
streams = {subscribers}
{ISP_PING}"#
    );
    s
}

/// The bigger ISP benchmark (issue 26): a 10 Gbit/s line to `subscribers` subscribers laid out as LibreQoS
/// lays them out: an mq root (handle 7fff:) over `queues` transmit queues, one HTB per queue (handle q:,
/// top class q:1), each subscriber's class (rate 1 mbit, ceil 20 mbit, an fq_codel leaf) in one queue's
/// HTB, subscribers dealt to the queues in turn. LibreQoS's XDP program picks a subscriber's CPU, hence
/// its transmit queue, and sets `skb->priority` to its classid; here a clsact egress u32 filter per
/// subscriber (hashed on the destination port's low byte, as in `isp`) does both with `skbedit
/// queue_mapping Q priority q:ID`, which mq's queue choice and `htb_classify` read. Subscriber i (port
/// 10000 + i) is in queue q = i % queues + 1, class q:(100 + i / queues) in hex, its leaf handle
/// (100 + i): in hex; the ping, unfiltered, is hashed to a queue and meets that HTB's default class q:2.
fn isp_mq(subscribers: u32, queues: u32) -> String {
    let mut s = format!(
        r#"# The bigger ISP benchmark (issue 26): {subscribers} subscribers behind one 10 Gbit/s line, an mq root with
# one HTB per transmit queue ({queues} queues) as LibreQoS lays it out, fq_codel leaves. `cargo bench -p
# tclab-sim -- isp` runs it. Written by crates/sim/src/builtin.rs (`isp_mq`).
name = "benchmark: {subscribers} subscribers, mq + {queues} HTBs, fq_codel each, 10 Gbit/s"
seed = 1
duration = "2s"
sample = "500ms"

{lab}qdisc replace dev eth1 root handle 7fff: mq
"#,
        lab = isp_lab("40gbit", "10gbit", &format!("numtxqueues = {queues}\n"))
    );
    for q in 1..=queues {
        let _ = writeln!(
            s,
            "qdisc add dev eth1 parent 7fff:{q:x} handle {q:x}: htb default 2\n\
             class add dev eth1 parent {q:x}: classid {q:x}:1 htb rate 10gbit ceil 10gbit quantum 3028\n\
             class add dev eth1 parent {q:x}:1 classid {q:x}:2 htb rate 1mbit ceil 20mbit"
        );
    }
    s.push_str(
        "qdisc add dev eth1 clsact\n\
         filter add dev eth1 egress prio 5 handle 2: protocol ip u32 divisor 256\n\
         filter add dev eth1 egress prio 5 protocol ip u32 ht 800:: match ip protocol 6 0xff hashkey mask 0x000000ff at 20 link 2:\n",
    );
    for i in 0..subscribers {
        let (q, port) = (i % queues + 1, 10000 + i);
        let (cid, leaf) = (0x100 + i / queues, 0x100 + i);
        let _ = writeln!(
            s,
            "class add dev eth1 parent {q:x}:1 classid {q:x}:{cid:x} htb rate 1mbit ceil 20mbit\n\
             qdisc add dev eth1 parent {q:x}:{cid:x} handle {leaf:x}: fq_codel\n\
             filter add dev eth1 egress prio 5 protocol ip u32 ht 2:{:x}: match ip dport {port} 0xffff \
             action skbedit queue_mapping {} priority {q:x}:{cid:x}",
            port & 0xff,
            q - 1
        );
    }
    s.push_str("\"\"\"\n");
    // A traffic entry has at most 1 000 streams: one entry per thousand subscribers.
    for first in (0..subscribers).step_by(1000) {
        let _ = write!(
            s,
            r#"
[[traffic]]
name = "downloads-{}"
kind = "tcp"
from = "internet"
to = "subscribers"
port = {}
streams = {}
"#,
            first / 1000,
            10000 + first,
            (subscribers - first).min(1000)
        );
    }
    s.push_str(ISP_PING);
    s
}

const SEED000_LAB: &str = include_str!("../scenarios/seed000/lab.toml");
const SEED001_LAB: &str = include_str!("../scenarios/seed001/lab.toml");
const SEED004_LAB: &str = include_str!("../scenarios/seed004/lab.toml");
const SEED004_DSL: &str = include_str!("../scenarios/seed004/dsl.toml");
const SEED004_DSL_ATM: &str = include_str!("../scenarios/seed004/dsl-atm.toml");
const CAKE_HOSTS_LAB: &str = include_str!("../scenarios/cake/hosts-lab.toml");
const CAKE_ACK_LAB: &str = include_str!("../scenarios/cake/ack-lab.toml");
const RRUL_LAB: &str = include_str!("../scenarios/rrul/lab.toml");
const SEED004_CAKE: &str = include_str!("../scenarios/seed004/cake.toml");
const SEED004_CONDITIONER: &str = include_str!("../scenarios/seed004/conditioner.toml");
const SEED004_PING: &str = include_str!("../scenarios/seed004/ping.toml");
const SEED004_UPLOAD: &str = include_str!("../scenarios/seed004/upload.toml");
const SEED004_DOWNLOAD: &str = include_str!("../scenarios/seed004/download.toml");
/// The idle line's plot: the pings' way out, as the uploads' (download.toml and upload.toml each name theirs).
const SEED004_IDLE_PLOT: &str = "[plot]\nin = \"router:eth0\"\nout = \"router:ppp0\"\n";

pub const BUILTIN: &[Builtin] = &[
    Builtin {
        name: "seed000-tbf",
        description: "seed 000's lab: TBF 180kbit latency 20ms buffer 1540 on the router, 30 UDP streams, a ping",
        source: Parts(&[include_str!("../scenarios/seed000-tbf.toml")]),
    },
    Builtin {
        name: "seed000-tbf-burst",
        description: "seed 000: TBF rate 40mbit burst 159900000 latency 10s, a 926 Mbit/s UDP flood: the spike, then the rate",
        source: Parts(&[
            "name = \"seed 000: TBF rate 40mbit burst 159900000 latency 10s\"\nduration = \"10s\"\n",
            SEED000_LAB,
            include_str!("../scenarios/seed000/tbf-burst.toml"),
        ]),
    },
    Builtin {
        name: "seed000-htb-180kbit",
        description: "seed 000: HTB one class 180kbit with its default pfifo leaf, UDP flood, ping (the seed: 65 s)",
        source: Parts(&[
            "name = \"seed 000: HTB rate 180kbit, default leaf\"\nduration = \"100s\"\n",
            SEED000_LAB,
            include_str!("../scenarios/seed000/htb-180kbit.toml"),
        ]),
    },
    Builtin {
        name: "seed000-htb-2mbit",
        description: "seed 000: HTB one class 2mbit with its default pfifo leaf, UDP flood, ping (the seed: 6 s)",
        source: Parts(&[
            "name = \"seed 000: HTB rate 2mbit, default leaf\"\nduration = \"30s\"\n",
            SEED000_LAB,
            include_str!("../scenarios/seed000/htb-2mbit.toml"),
        ]),
    },
    Builtin {
        name: "seed000-htb-128mbit",
        description: "seed 000: HTB one class 128mbit with its default pfifo leaf, UDP flood, ping (the seed: 100 ms)",
        source: Parts(&[
            "name = \"seed 000: HTB rate 128mbit, default leaf\"\nduration = \"20s\"\n",
            SEED000_LAB,
            include_str!("../scenarios/seed000/htb-128mbit.toml"),
        ]),
    },
    Builtin {
        name: "seed000-htb-rates",
        description: "seed 000: HTB one class (rate 128mbit; sweep policy.router0.rate) with its default leaf, UDP flood, ping every 10 ms",
        source: Parts(&[
            "name = \"seed 000: HTB one class, default leaf\"\nduration = \"30s\"\n",
            SEED000_LAB,
            include_str!("../scenarios/seed000/htb-rates.toml"),
        ]),
    },
    Builtin {
        name: "seed000-htb-leaf",
        description: "seed 000: HTB 1mbit burst 1600 cburst 1600, its leaf a pfifo of 1000 (sweep policy.1.tc for TBF or SFQ), UDP flood, ping",
        source: Parts(&[
            "name = \"seed 000: HTB 1mbit, a leaf qdisc\"\nduration = \"40s\"\n",
            SEED000_LAB,
            include_str!("../scenarios/seed000/htb-leaf.toml"),
        ]),
    },
    Builtin {
        name: "seed000-htb-burst",
        description: "seed 000: HTB one class 1mbit with burst/cburst 409600, default leaf, UDP flood from 1 s: a spike, then the rate",
        source: Parts(&[
            "name = \"seed 000: HTB rate 1mbit burst 409600 cburst 409600\"\nduration = \"10s\"\n",
            SEED000_LAB,
            include_str!("../scenarios/seed000/htb-burst.toml"),
        ]),
    },
    Builtin {
        name: "seed000-iperf",
        description: "seed 000's traffic as run: 29 TCP and 29 UDP iperf streams and a ping, no shaper (sweep policy.0.tc for one)",
        source: Parts(&[
            "name = \"seed 000: 29 TCP + 29 UDP iperf streams, no shaper\"\nduration = \"30s\"\n",
            SEED000_LAB,
            include_str!("../scenarios/seed000/iperf.toml"),
        ]),
    },
    Builtin {
        name: "seed000-hfsc-180kbit",
        description: "seed 000's empty HFSC section: one class sc+ul 180kbit, default pfifo leaf, UDP flood, ping",
        source: Parts(&[
            "name = \"seed 000: HFSC sc/ul 180kbit, default leaf\"\nduration = \"100s\"\n",
            SEED000_LAB,
            include_str!("../scenarios/seed000/hfsc-180kbit.toml"),
        ]),
    },
    Builtin {
        name: "seed000-hfsc-rt-180kbit",
        description: "seed 000's HFSC: the same shaper, ICMP in a real-time class (rt umax 1514b dmax 10ms)",
        source: Parts(&[
            "name = \"seed 000: HFSC 180kbit, ping in a real-time class\"\nduration = \"100s\"\n",
            SEED000_LAB,
            include_str!("../scenarios/seed000/hfsc-rt-180kbit.toml"),
        ]),
    },
    Builtin {
        name: "seed001-test1",
        description: "seed 001's Test 1: one UDP stream (512 B at 32 Mbit/s) through HTB rate/ceil 30mbit burst/cburst 18k on Fast Ethernet",
        source: Parts(&[
            "name = \"seed 001: HTB 30mbit burst 18k cburst 18k, one stream\"\n",
            SEED001_LAB,
            include_str!("../scenarios/seed001/test1.toml"),
        ]),
    },
    Builtin {
        name: "seed001-test1-default",
        description: "seed 001's Test 1 with tc's default burst/cburst: 64-byte datagrams at 32 Mbit/s through HTB 30mbit",
        source: Parts(&[
            "name = \"seed 001: HTB 30mbit, default burst, one stream\"\n",
            SEED001_LAB,
            include_str!("../scenarios/seed001/test1-default.toml"),
        ]),
    },
    Builtin {
        name: "seed001-test2",
        description: "seed 001's Test 2 (Table 6): three UDP streams, one level of inheritance (30mbit: 2mbit and 28mbit, ceil 30mbit)",
        source: Parts(&[
            "name = \"seed 001: Test 2, one level of inheritance\"\n",
            SEED001_LAB,
            include_str!("../scenarios/seed001/test2.toml"),
        ]),
    },
    Builtin {
        name: "seed001-test3",
        description: "seed 001's Test 3 (Table 7): four UDP streams, two levels of inheritance (28mbit shared 10/5/13, ceil 28mbit)",
        source: Parts(&[
            "name = \"seed 001: Test 3, two levels of inheritance\"\n",
            SEED001_LAB,
            include_str!("../scenarios/seed001/test3.toml"),
        ]),
    },
    Builtin {
        name: "seed003-bufferbloat",
        description: "seed 003: ping beside a bulk upload, a 1000-packet FIFO before a 10 Mbit/s link (the seed: 940 ms)",
        source: Parts(&[include_str!("../scenarios/seed003/bufferbloat.toml")]),
    },
    Builtin {
        name: "dctcp-fq_codel",
        description: "one DCTCP download through fq_codel ce_threshold 1ms on a 10 Mbit/s downlink: CE marks, no drops, a queue under one frame",
        source: Parts(&[include_str!("../scenarios/dctcp/fq_codel.toml")]),
    },
    Builtin {
        name: "bench-htb",
        description: "the simulator benchmark: 60 s, 30 TCP streams through a 100 Mbit HTB bottleneck, a ping",
        source: Parts(&[include_str!("../scenarios/bench-htb.toml")]),
    },
    Builtin {
        name: "bench-isp",
        description: "the ISP benchmark: 10 s, 1 000 subscribers (HTB 1mbit/20mbit + fq_codel each, hashed u32), 1 000 TCP downloads, 1 Gbit/s",
        source: Generated(|| isp(1000)),
    },
    Builtin {
        name: "bench-isp-10k",
        description: "the bigger ISP benchmark: 2 s, 10 000 subscribers on a 10 Gbit/s line, mq with an HTB per transmit queue (8, as LibreQoS), fq_codel leaves, 10 000 TCP downloads",
        source: Generated(|| isp_mq(10_000, 8)),
    },
    Builtin {
        name: "seed004-idle",
        description: "seed 004's ADSL lab, no conditioner, idle line: the baseline ping",
        source: Parts(&["name = \"seed 004: baseline, idle line\"\n", SEED004_LAB, SEED004_DSL, SEED004_PING, SEED004_IDLE_PLOT]),
    },
    Builtin {
        name: "seed004-download",
        description: "seed 004's ADSL lab, no conditioner, ping while downloading",
        source: Parts(&["name = \"seed 004: downloading, no conditioner\"\n", SEED004_LAB, SEED004_DSL, SEED004_DOWNLOAD, SEED004_PING]),
    },
    Builtin {
        name: "seed004-upload",
        description: "seed 004's ADSL lab, no conditioner, ping while uploading",
        source: Parts(&["name = \"seed 004: uploading, no conditioner\"\n", SEED004_LAB, SEED004_DSL, SEED004_UPLOAD, SEED004_PING]),
    },
    Builtin {
        name: "seed004-upload-conditioned",
        description: "seed 004's ADSL lab with the HTB conditioner, ping while uploading",
        source: Parts(&[
            "name = \"seed 004: uploading, with the conditioner\"\n",
            SEED004_LAB, SEED004_DSL,
            SEED004_CONDITIONER,
            SEED004_UPLOAD,
            SEED004_PING,
        ]),
    },
    Builtin {
        name: "seed004-download-conditioned",
        description: "seed 004's ADSL lab with the HTB conditioner, ping while downloading",
        source: Parts(&[
            "name = \"seed 004: downloading, with the conditioner\"\n",
            SEED004_LAB, SEED004_DSL,
            SEED004_CONDITIONER,
            SEED004_DOWNLOAD,
            SEED004_PING,
        ]),
    },
    Builtin {
        name: "cake-adsl-upload",
        description: "seed 004's line as ATM, no conditioner, ping while uploading (the CAKE comparison's baseline)",
        source: Parts(&["name = \"ADSL over ATM: uploading, no conditioner\"\n", SEED004_LAB, SEED004_DSL_ATM, SEED004_UPLOAD, SEED004_PING]),
    },
    Builtin {
        name: "cake-adsl-upload-htb",
        description: "seed 004's line as ATM with the seed's HTB conditioner (86 % of the line), ping while uploading",
        source: Parts(&["name = \"ADSL over ATM: uploading, HTB conditioner\"\n", SEED004_LAB, SEED004_DSL_ATM, SEED004_CONDITIONER, SEED004_UPLOAD, SEED004_PING]),
    },
    Builtin {
        name: "cake-adsl-upload-cake",
        description: "seed 004's line as ATM with CAKE at 100 % of the line (pppoe-llcsnap), ping while uploading",
        source: Parts(&["name = \"ADSL over ATM: uploading, CAKE at the line rate\"\n", SEED004_LAB, SEED004_DSL_ATM, SEED004_CAKE, SEED004_UPLOAD, SEED004_PING]),
    },
    Builtin {
        name: "cake-adsl-download",
        description: "seed 004's line as ATM, no conditioner, ping while downloading",
        source: Parts(&["name = \"ADSL over ATM: downloading, no conditioner\"\n", SEED004_LAB, SEED004_DSL_ATM, SEED004_DOWNLOAD, SEED004_PING]),
    },
    Builtin {
        name: "cake-adsl-download-htb",
        description: "seed 004's line as ATM with the seed's HTB conditioner (download policed at 80 %), ping while downloading",
        source: Parts(&["name = \"ADSL over ATM: downloading, HTB conditioner\"\n", SEED004_LAB, SEED004_DSL_ATM, SEED004_CONDITIONER, SEED004_DOWNLOAD, SEED004_PING]),
    },
    Builtin {
        name: "cake-adsl-download-cake",
        description: "seed 004's line as ATM with CAKE at 95 % of the downstream rate on an ifb, ping while downloading",
        source: Parts(&["name = \"ADSL over ATM: downloading, CAKE at 95 % on an ifb\"\n", SEED004_LAB, SEED004_DSL_ATM, SEED004_CAKE, SEED004_DOWNLOAD, SEED004_PING]),
    },
    Builtin {
        name: "cake-hosts-fq_codel",
        description: "two hosts share a 10 Mbit/s uplink, one with 1 TCP upload, one with 8: HTB + fq_codel (per-flow fairness)",
        source: Parts(&["name = \"host fairness: HTB + fq_codel\"\n", CAKE_HOSTS_LAB, include_str!("../scenarios/cake/hosts-fq_codel.toml")]),
    },
    Builtin {
        name: "cake-hosts-cake",
        description: "two hosts share a 10 Mbit/s uplink, one with 1 TCP upload, one with 8: CAKE triple-isolate (per-host fairness)",
        source: Parts(&["name = \"host fairness: CAKE triple-isolate\"\n", CAKE_HOSTS_LAB, include_str!("../scenarios/cake/hosts-cake.toml")]),
    },
    Builtin {
        name: "cake-ack-filter-off",
        description: "1 Mbit/s up / 20 Mbit/s down, a download beside 4 uploads, CAKE on the uplink without the ACK filter",
        source: Parts(&["name = \"ACK filter: off\"\n", CAKE_ACK_LAB, include_str!("../scenarios/cake/ack-off.toml")]),
    },
    Builtin {
        name: "cake-ack-filter-on",
        description: "1 Mbit/s up / 20 Mbit/s down, a download beside 4 uploads, CAKE on the uplink with ack-filter",
        source: Parts(&["name = \"ACK filter: on\"\n", CAKE_ACK_LAB, include_str!("../scenarios/cake/ack-on.toml")]),
    },
    Builtin {
        name: "rrul-10mbit-pfifo_fast",
        description: "RRUL (4+4 TCP, ping, VoIP) over a 10 Mbit/s line, 40 ms RTT: pfifo_fast (no policy)",
        source: Parts(&[
            "name = \"RRUL 10 Mbit/s: pfifo_fast (no policy)\"\n",
            RRUL_LAB,
            include_str!("../scenarios/rrul/line-10.toml"),
            include_str!("../scenarios/rrul/pfifo_fast.toml"),
        ]),
    },
    Builtin {
        name: "rrul-10mbit-htb-pfifo",
        description: "RRUL (4+4 TCP, ping, VoIP) over a 10 Mbit/s line, 40 ms RTT: HTB at the line rate over pfifo",
        source: Parts(&[
            "name = \"RRUL 10 Mbit/s: HTB at the line rate over pfifo\"\n",
            RRUL_LAB,
            include_str!("../scenarios/rrul/line-10.toml"),
            include_str!("../scenarios/rrul/htb-pfifo-10.toml"),
        ]),
    },
    Builtin {
        name: "rrul-10mbit-htb-fq_codel",
        description: "RRUL (4+4 TCP, ping, VoIP) over a 10 Mbit/s line, 40 ms RTT: HTB at the line rate over fq_codel",
        source: Parts(&[
            "name = \"RRUL 10 Mbit/s: HTB at the line rate over fq_codel\"\n",
            RRUL_LAB,
            include_str!("../scenarios/rrul/line-10.toml"),
            include_str!("../scenarios/rrul/htb-fq_codel-10.toml"),
        ]),
    },
    Builtin {
        name: "rrul-10mbit-fq_codel",
        description: "RRUL (4+4 TCP, ping, VoIP) over a 10 Mbit/s line, 40 ms RTT: fq_codel alone",
        source: Parts(&[
            "name = \"RRUL 10 Mbit/s: fq_codel alone\"\n",
            RRUL_LAB,
            include_str!("../scenarios/rrul/line-10.toml"),
            include_str!("../scenarios/rrul/fq_codel.toml"),
        ]),
    },
    Builtin {
        name: "rrul-10mbit-cake",
        description: "RRUL (4+4 TCP, ping, VoIP) over a 10 Mbit/s line, 40 ms RTT: CAKE at the line rate",
        source: Parts(&[
            "name = \"RRUL 10 Mbit/s: CAKE at the line rate\"\n",
            RRUL_LAB,
            include_str!("../scenarios/rrul/line-10.toml"),
            include_str!("../scenarios/rrul/cake-10.toml"),
        ]),
    },
    Builtin {
        name: "rrul-100mbit-pfifo_fast",
        description: "RRUL (4+4 TCP, ping, VoIP) over a 100 Mbit/s line, 40 ms RTT: pfifo_fast (no policy)",
        source: Parts(&[
            "name = \"RRUL 100 Mbit/s: pfifo_fast (no policy)\"\n",
            RRUL_LAB,
            include_str!("../scenarios/rrul/line-100.toml"),
            include_str!("../scenarios/rrul/pfifo_fast.toml"),
        ]),
    },
    Builtin {
        name: "rrul-100mbit-htb-pfifo",
        description: "RRUL (4+4 TCP, ping, VoIP) over a 100 Mbit/s line, 40 ms RTT: HTB at the line rate over pfifo",
        source: Parts(&[
            "name = \"RRUL 100 Mbit/s: HTB at the line rate over pfifo\"\n",
            RRUL_LAB,
            include_str!("../scenarios/rrul/line-100.toml"),
            include_str!("../scenarios/rrul/htb-pfifo-100.toml"),
        ]),
    },
    Builtin {
        name: "rrul-100mbit-htb-fq_codel",
        description: "RRUL (4+4 TCP, ping, VoIP) over a 100 Mbit/s line, 40 ms RTT: HTB at the line rate over fq_codel",
        source: Parts(&[
            "name = \"RRUL 100 Mbit/s: HTB at the line rate over fq_codel\"\n",
            RRUL_LAB,
            include_str!("../scenarios/rrul/line-100.toml"),
            include_str!("../scenarios/rrul/htb-fq_codel-100.toml"),
        ]),
    },
    Builtin {
        name: "rrul-100mbit-fq_codel",
        description: "RRUL (4+4 TCP, ping, VoIP) over a 100 Mbit/s line, 40 ms RTT: fq_codel alone",
        source: Parts(&[
            "name = \"RRUL 100 Mbit/s: fq_codel alone\"\n",
            RRUL_LAB,
            include_str!("../scenarios/rrul/line-100.toml"),
            include_str!("../scenarios/rrul/fq_codel.toml"),
        ]),
    },
    Builtin {
        name: "rrul-100mbit-cake",
        description: "RRUL (4+4 TCP, ping, VoIP) over a 100 Mbit/s line, 40 ms RTT: CAKE at the line rate",
        source: Parts(&[
            "name = \"RRUL 100 Mbit/s: CAKE at the line rate\"\n",
            RRUL_LAB,
            include_str!("../scenarios/rrul/line-100.toml"),
            include_str!("../scenarios/rrul/cake-100.toml"),
        ]),
    },
    Builtin {
        name: "rrul-10mbit-pie",
        description: "RRUL (4+4 TCP, ping, VoIP) over a 10 Mbit/s line, 40 ms RTT: PIE alone",
        source: Parts(&[
            "name = \"RRUL 10 Mbit/s: PIE alone\"\n",
            RRUL_LAB,
            include_str!("../scenarios/rrul/line-10.toml"),
            include_str!("../scenarios/rrul/pie.toml"),
        ]),
    },
    Builtin {
        name: "rrul-10mbit-red",
        description: "RRUL (4+4 TCP, ping, VoIP) over a 10 Mbit/s line, 40 ms RTT: RED alone",
        source: Parts(&[
            "name = \"RRUL 10 Mbit/s: RED alone\"\n",
            RRUL_LAB,
            include_str!("../scenarios/rrul/line-10.toml"),
            include_str!("../scenarios/rrul/red-10.toml"),
        ]),
    },
    Builtin {
        name: "rrul-100mbit-pie",
        description: "RRUL (4+4 TCP, ping, VoIP) over a 100 Mbit/s line, 40 ms RTT: PIE alone",
        source: Parts(&[
            "name = \"RRUL 100 Mbit/s: PIE alone\"\n",
            RRUL_LAB,
            include_str!("../scenarios/rrul/line-100.toml"),
            include_str!("../scenarios/rrul/pie.toml"),
        ]),
    },
    Builtin {
        name: "rrul-100mbit-red",
        description: "RRUL (4+4 TCP, ping, VoIP) over a 100 Mbit/s line, 40 ms RTT: RED alone",
        source: Parts(&[
            "name = \"RRUL 100 Mbit/s: RED alone\"\n",
            RRUL_LAB,
            include_str!("../scenarios/rrul/line-100.toml"),
            include_str!("../scenarios/rrul/red-100.toml"),
        ]),
    },
];

pub fn find(name: &str) -> Option<&'static Builtin> {
    BUILTIN.iter().find(|b| b.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_loads() {
        for b in BUILTIN {
            if let Err(e) = crate::scenario::load(b.name, &b.toml(), std::path::Path::new(".")) {
                panic!("built-in {}: {e}", b.name);
            }
        }
    }

    #[test]
    fn seed004_runs_plot_the_direction_of_their_transfer() {
        // A download's bytes come in on the line (ppp0, where the seed's conditioner polices them at
        // 800 kbit/s) and leave towards the LAN; the other way carries only its ACKs (~25 kbit/s). An
        // upload is the reverse. Found by a user: the downloads plotted eth0 IN, ppp0 OUT, the ACKs.
        let mut seen = 0;
        for b in BUILTIN
            .iter()
            .filter(|b| b.name.starts_with("seed004-") || b.name.starts_with("cake-adsl-"))
        {
            let sc = crate::scenario::load(b.name, &b.toml(), std::path::Path::new(".")).unwrap();
            let (i, o) = sc.plot_in_out;
            let label = |x: Option<usize>| x.map(|x| sc.net.iface_label(x));
            let (want_in, want_out) = if b.name.contains("download") {
                ("router:ppp0", "router:eth0")
            } else {
                ("router:eth0", "router:ppp0")
            };
            assert_eq!(
                (label(i), label(o)),
                (Some(want_in.to_string()), Some(want_out.to_string())),
                "{}",
                b.name
            );
            seen += 1;
        }
        assert_eq!(seen, 11);
    }
}
