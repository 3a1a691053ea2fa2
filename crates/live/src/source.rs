//! A traffic source of tclab's own, for measuring a shaper faster than iperf3 can feed it here.
//!
//! iperf3's UDP senders top out near 0.9 Gbit/s on this machine's two shared cores: every datagram
//! crosses the sender's UDP and IP stack, and a receiving iperf3 reads each one again. This source
//! does neither. It builds its Ethernet/IPv4/UDP frames once and hands them to a packet socket
//! with `sendmmsg`, 64 a call, past the sending device's qdisc (`PACKET_QDISC_BYPASS`, as the
//! bridge sends): a frame costs the sender one `veth_xmit` and the receiving side's softirq. The
//! frames are addressed to a station that does not exist (`02:00:00:00:00:01`), so the node at the
//! far end of the shaped path drops them in `ip_rcv` as another host's (`PACKET_OTHERHOST`), no
//! socket, reply or ICMP error; what it got is read from the kernel's interface counters
//! ([`counters`], `/proc/net/dev`), which count each frame's bytes from its Ethernet header on — the
//! length a qdisc charges (`qdisc_pkt_len`), so a shaped rate and a received rate compare directly.
//!
//! Paced by `CLOCK_MONOTONIC` to the rate asked: frames are sent when due, in batches, and the
//! thread sleeps until 32 more are due — so the source takes a small share of a core at 1 Gbit/s
//! and leaves the rest to the bridge it feeds. Bounded in time and in frames.

use crate::sys;
use std::io;

/// What to send: `len`-byte frames (Ethernet header included, no FCS) at `rate` bits per second of
/// frames, spread over `flows` UDP source ports (at most 64), for `secs` seconds or `max_frames` frames.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    pub len: usize,
    pub flows: u16,
    pub rate: u64,
    pub secs: f64,
    pub max_frames: u64,
}

/// What was sent: frames the kernel took, and over how long.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Sent {
    pub frames: u64,
    pub bytes: u64,
    pub elapsed_ns: u64,
}

/// The smallest frame: a 14-byte Ethernet header and 46 bytes (IPv4, UDP, padding), FCS aside.
pub const MIN_LEN: usize = 60;
/// The largest: an IPv4 datagram of 65 535 bytes and its Ethernet header.
pub const MAX_LEN: usize = 65_535 + 14;
/// Frames per `sendmmsg` (the socket's batch).
const BATCH: usize = 64;

/// One Ethernet frame of `len` bytes carrying an IPv4/UDP datagram from 10.0.1.2 port `sport` to
/// 10.0.1.1 port 9 (discard), to the MAC address `02:00:00:00:00:01`, which no station has. The IPv4
/// header checksum is computed; the UDP checksum is 0 (none, as IPv4 allows).
pub fn udp_frame(len: usize, sport: u16) -> Vec<u8> {
    assert!(
        (MIN_LEN..=MAX_LEN).contains(&len),
        "frame length {len} outside {MIN_LEN}..={MAX_LEN}"
    );
    let mut f = vec![0u8; len];
    f[..14].copy_from_slice(&[2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00]);
    let ip_len = (len - 14) as u16;
    let ip = &mut f[14..34];
    ip.copy_from_slice(&[
        0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 1, 2, 10, 0, 1, 1,
    ]);
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    let sum = tclab_core::csum::ip_header(ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    f[34..36].copy_from_slice(&sport.to_be_bytes());
    f[36..38].copy_from_slice(&9u16.to_be_bytes());
    f[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
    f
}

/// Check a spec before anything is sent: each mistake named.
pub fn check(spec: &Spec) -> Result<(), String> {
    if !(MIN_LEN..=MAX_LEN).contains(&spec.len) {
        return Err(format!(
            "frame length {} is outside {MIN_LEN}..={MAX_LEN} bytes",
            spec.len
        ));
    }
    if spec.flows == 0 {
        return Err("at least one flow is needed".into());
    }
    // One batch of frames is built, cycling through the flows' ports; a batch is a slice of it.
    if spec.flows as usize > BATCH {
        return Err(format!(
            "{} flows: at most {BATCH} (one batch of frames is built, a port each)",
            spec.flows
        ));
    }
    if spec.rate == 0 {
        return Err("the rate must be above 0 bit/s".into());
    }
    if !(spec.secs.is_finite() && spec.secs > 0.0) {
        return Err(format!(
            "the duration must be a positive number of seconds, not {}",
            spec.secs
        ));
    }
    Ok(())
}

/// Frames due by `elapsed_ns` at `rate` bit/s of `len`-byte frames (the first at once).
fn due(elapsed_ns: u64, rate: u64, len: usize) -> u64 {
    (elapsed_ns as u128 * rate as u128 / (8 * len as u128 * 1_000_000_000)) as u64 + 1
}

/// The time at which frame `n` (counted from 0) is due.
fn due_at_ns(n: u64, rate: u64, len: usize) -> u64 {
    (n as u128 * 8 * len as u128 * 1_000_000_000).div_ceil(rate as u128) as u64
}

/// Send `spec`'s frames out of `dev` (in the calling thread's network namespace) until its time or
/// frame count is reached; frames the socket does not take at once are offered again later.
pub fn send(dev: &str, spec: &Spec) -> io::Result<Sent> {
    check(spec).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let sock = sys::PacketSocket::open(dev)?;
    let frames: Vec<Vec<u8>> = (0..BATCH)
        .map(|i| udp_frame(spec.len, 1024 + (i as u16 % spec.flows)))
        .collect();
    sys::precise_timers();
    let end_ns = (spec.secs * 1e9) as u64;
    let start = sys::monotonic_ns();
    let mut sent = 0u64;
    loop {
        let elapsed = sys::monotonic_ns() - start;
        if elapsed >= end_ns || sent >= spec.max_frames {
            return Ok(Sent {
                frames: sent,
                bytes: sent * spec.len as u64,
                elapsed_ns: elapsed,
            });
        }
        let due = due(elapsed, spec.rate, spec.len).min(spec.max_frames);
        let mut behind = due.saturating_sub(sent);
        while behind > 0 {
            let n = (behind as usize).min(BATCH);
            // The frames of a batch cycle through the flows; a batch starts where the last ended.
            let first = (sent % spec.flows as u64) as usize;
            let taken = sock.send_batch(&frames[first..first + n.min(BATCH - first)])?;
            sent += taken as u64;
            behind -= taken as u64;
            if taken == 0 {
                break;
            }
        }
        // Sleep until 32 more frames are due (or the end), unless the socket refused: then briefly.
        let next = if behind > 0 {
            elapsed + 50_000
        } else {
            due_at_ns(sent + 31, spec.rate, spec.len).min(end_ns)
        };
        let now = sys::monotonic_ns() - start;
        if next > now {
            sys::pause_ns(next - now);
        }
    }
}

/// A device's counters as the kernel keeps them (`/proc/net/dev`), bytes from the Ethernet header on.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Counters {
    pub rx_bytes: u64,
    pub rx_packets: u64,
    pub rx_dropped: u64,
    pub tx_bytes: u64,
    pub tx_packets: u64,
    pub tx_dropped: u64,
}

/// `dev`'s counters in the calling thread's network namespace (`/proc/thread-self/net/dev`: the
/// thread's, where `/sys/class/net` would show the namespace /sys was mounted in).
pub fn counters(dev: &str) -> io::Result<Counters> {
    let text = std::fs::read_to_string("/proc/thread-self/net/dev")?;
    parse_counters(&text, dev).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("{dev}: no such interface in /proc/net/dev"),
        )
    })
}

/// `dev`'s line of `/proc/net/dev`: 8 receive fields (bytes, packets, errs, drop, fifo, frame,
/// compressed, multicast), then 8 transmit fields (bytes, packets, errs, drop, …).
fn parse_counters(text: &str, dev: &str) -> Option<Counters> {
    let line = text.lines().find_map(|l| {
        let (name, rest) = l.split_once(':')?;
        (name.trim() == dev).then_some(rest)
    })?;
    let v: Vec<u64> = line
        .split_whitespace()
        .map(|w| w.parse().ok())
        .collect::<Option<_>>()?;
    (v.len() >= 12).then(|| Counters {
        rx_bytes: v[0],
        rx_packets: v[1],
        rx_dropped: v[3],
        tx_bytes: v[8],
        tx_packets: v[9],
        tx_dropped: v[11],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_is_well_formed_ipv4_udp_of_the_length_asked() {
        let f = udp_frame(1514, 1030);
        assert_eq!(f.len(), 1514);
        assert_eq!(&f[12..14], &[0x08, 0x00], "IPv4 ethertype");
        assert_eq!(u16::from_be_bytes([f[16], f[17]]), 1500, "IP total length");
        assert_eq!(u16::from_be_bytes([f[38], f[39]]), 1480, "UDP length");
        assert_eq!(u16::from_be_bytes([f[34], f[35]]), 1030, "source port");
        // A header with its checksum sums to 0xffff (RFC 1071), whatever the length.
        for len in [MIN_LEN, 64, 1514, 9014] {
            let f = udp_frame(len, 1024);
            let mut sum: u32 = f[14..34]
                .chunks(2)
                .map(|w| u16::from_be_bytes([w[0], w[1]]) as u32)
                .sum();
            sum = (sum & 0xffff) + (sum >> 16);
            assert_eq!(sum, 0xffff, "{len}: header checksum");
        }
        // A known header: total length 0x05dc, DF, TTL 64, UDP, 10.0.1.2 → 10.0.1.1. By hand:
        // 4500+05dc+0000+4000+4011+0a00+0102+0a00+0101 = 0xe0f0, no carry; checksum !0xe0f0 = 0x1f0f.
        assert_eq!(&udp_frame(1514, 1024)[24..26], &[0x1f, 0x0f]);
    }

    #[test]
    fn frames_are_due_at_the_rate_the_first_at_once() {
        // 1 Gbit/s of 1514-byte frames: one every 12 112 ns, 82 562.4 a second.
        assert_eq!(due(0, 1_000_000_000, 1514), 1);
        assert_eq!(due(12_111, 1_000_000_000, 1514), 1);
        assert_eq!(due(12_112, 1_000_000_000, 1514), 2);
        assert_eq!(due(1_000_000_000, 1_000_000_000, 1514), 82_562 + 1);
        assert_eq!(due_at_ns(1, 1_000_000_000, 1514), 12_112);
        assert_eq!(due_at_ns(82_562, 1_000_000_000, 1514), 999_990_944);
    }

    #[test]
    fn mistakes_in_a_spec_are_named() {
        let ok = Spec {
            len: 1514,
            flows: 1,
            rate: 1_000_000,
            secs: 1.0,
            max_frames: 10,
        };
        assert_eq!(check(&ok), Ok(()));
        let e = check(&Spec { len: 59, ..ok }).unwrap_err();
        assert!(e.contains("frame length 59"), "{e}");
        assert!(check(&Spec { flows: 0, ..ok })
            .unwrap_err()
            .contains("flow"));
        // The frames are built once, one batch of them, cycling through the flows' ports: a 65th
        // flow would start a batch past them (it panicked slicing them before it was refused).
        assert_eq!(check(&Spec { flows: 64, ..ok }), Ok(()));
        let e = check(&Spec { flows: 65, ..ok }).unwrap_err();
        assert!(e.contains("65 flows") && e.contains("at most 64"), "{e}");
        assert!(check(&Spec { rate: 0, ..ok }).unwrap_err().contains("rate"));
        let e = check(&Spec {
            secs: f64::NAN,
            ..ok
        })
        .unwrap_err();
        assert!(e.contains("positive number of seconds"), "{e}");
    }

    #[test]
    fn counters_are_read_from_proc_net_dev() {
        let text = "Inter-|   Receive                                                |  Transmit\n \
            face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    \
            lo:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0\n  \
            eth0: 1514000    1000    0    7    0     0          0         0     6056       4    0    3    0     0       0          0\n";
        assert_eq!(
            parse_counters(text, "eth0"),
            Some(Counters {
                rx_bytes: 1_514_000,
                rx_packets: 1000,
                rx_dropped: 7,
                tx_bytes: 6056,
                tx_packets: 4,
                tx_dropped: 3,
            })
        );
        assert_eq!(parse_counters(text, "eth1"), None);
        assert_eq!(parse_counters(text, "eth"), None, "names match whole");
    }
}
