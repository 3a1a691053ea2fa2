//! The live receive path's fuzz body: arbitrary bytes become frames arriving on either port of a
//! detached bridge ([`Bridge::detached`]) whose policy exercises every stage a frame can reach —
//! ingress u32 and police, a mirred redirect to an ifb with HTB and SFQ, an egress HTB with fq_codel
//! and a TOS filter. Some inputs are fed as receive-ring slots instead, header and all
//! ([`Bridge::arrive_slot`]), as a corrupt ring would hand them over, and some as an AF_XDP socket
//! hands them over ([`Bridge::arrive_unflagged`]: a checksum left to a device is told by the
//! bytes, and completed). The property: no panic, and
//! every frame is counted once. The libFuzzer target
//! (`fuzz/fuzz_targets/live_frames.rs`) and the stable test (`tests/bridge.rs`) run this body.

use crate::bridge::Bridge;
use tclab_core::Engine;

/// The policy frames meet.
pub const POLICY: &[&str] = &[
    "link add dev ifb0 type ifb",
    "link set dev ifb0 up",
    "tc qdisc add dev ifb0 root handle 1: htb default 10",
    "tc class add dev ifb0 parent 1: classid 1:10 htb rate 100mbit",
    "tc qdisc add dev ifb0 parent 1:10 sfq",
    "tc qdisc add dev eth1 handle ffff: ingress",
    "tc filter add dev eth1 parent ffff: protocol ip prio 1 u32 match ip dport 5201 0xffff police rate 1mbit burst 10k conform-exceed drop/continue",
    "tc filter add dev eth1 parent ffff: protocol all prio 2 u32 match u32 0 0 action mirred egress redirect dev ifb0",
    "tc qdisc add dev eth0 root handle 1: htb default 20",
    "tc class add dev eth0 parent 1: classid 1:20 htb rate 50mbit",
    "tc qdisc add dev eth0 parent 1:20 fq_codel",
    "tc filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip tos 0x10 0xff flowid 1:20",
];

/// A detached bridge eth0 ⇄ eth1 with [`POLICY`].
pub fn bridge() -> Bridge {
    let mut e = Engine::new();
    for l in POLICY {
        let words: Vec<String> = l.split_whitespace().map(String::from).collect();
        tclab_tc::store::apply_record(&mut e, &words).expect("the fuzz policy applies");
    }
    Bridge::detached(e, [("eth0", 1500), ("eth1", 1500)])
}

/// Feed `data` as frames: each is a 4-byte header (length high and low byte; port, truncation,
/// "a ring slot" and "from AF_XDP" in the third's bits 0 to 3; time step in µs in the fourth) and
/// that many bytes.
/// Returns the frames fed.
pub fn fuzz_one(b: &mut Bridge, data: &[u8], mut now: u64) -> (u64, u64) {
    let mut rest = data;
    let mut fed = 0;
    while rest.len() >= 4 {
        let len = (u16::from_be_bytes([rest[0], rest[1]]) % 2048) as usize;
        let flags = rest[2];
        let (port, truncated, slot) = ((rest[2] & 1) as usize, rest[2] & 2 != 0, rest[2] & 4 != 0);
        now += rest[3] as u64 * 1000;
        rest = &rest[4..];
        let frame = &rest[..len.min(rest.len())];
        rest = &rest[frame.len()..];
        if slot {
            b.arrive_slot(now, port, frame);
        } else if flags & 8 != 0 {
            b.arrive_unflagged(now, port, frame);
        } else {
            b.arrive(now, port, frame, truncated);
        }
        fed += 1;
        if fed % 32 == 0 {
            b.poll(now);
            b.take_sent(0);
            b.take_sent(1);
        }
    }
    b.poll(now + 1_000_000_000);
    (fed, now)
}
