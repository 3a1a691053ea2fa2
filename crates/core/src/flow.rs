//! The flow dissector: what identifies a packet's flow (`skb_get_hash` and the flow keys behind it), for the
//! disciplines that queue per flow — SFQ's buckets, fq_codel's flows (CAKE's later) — each with its own
//! secret. The kernel keys its hash with a random secret (`hashrnd`, a qdisc's perturbation); tclab draws
//! every secret from the run's seed, so that a run is reproducible. As in the kernel, the disciplines that
//! call `skb_get_hash` (fq_codel, fq_pie, mq's and multiq's `skb_tx_hash`) share the hash the packet
//! carries; SFQ, SFB, HHF and CAKE hash the keys again with their own perturbation, as theirs do.

use crate::packet::Packet;

/// splitmix64: a small, well-mixed deterministic generator for the perturbation secret.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A keyed hash of a few words (the kernel uses siphash; any keyed mix with good diffusion serves SFQ).
pub fn keyed_hash(key: [u64; 2], words: &[u64]) -> u32 {
    let mut h = key[0] ^ 0x736f_6d65_7073_6575;
    for &w in words {
        let mut s = h ^ w;
        h = splitmix64(&mut s) ^ key[1];
    }
    let mut s = h ^ (words.len() as u64);
    (splitmix64(&mut s) >> 32) as u32
}

/// `skb_get_hash`: the packet's flow hash (`skb->hash`), computed from its flow keys with `key` the first
/// time it is asked for and kept on the packet, so that every later discipline on the packet's path
/// (fq_codel, fq_pie, mq's and multiq's queue choice) reads the same value without hashing again. A
/// driver may set it when it makes the packet, as a NIC's receive hash or a socket does; the simulator
/// does, with one key per run (the kernel's `hashrnd`). Never 0, which means "not computed".
pub fn skb_get_hash(pkt: &mut Packet, key: [u64; 2]) -> u32 {
    if pkt.hash == 0 {
        pkt.hash = flow_hash(pkt, key);
    }
    pkt.hash
}

/// The hash `skb_get_hash` gives, for a caller that holds the packet by reference (mq's queue choice):
/// the one the packet carries, else computed and not kept.
pub fn flow_hash(pkt: &Packet, key: [u64; 2]) -> u32 {
    if pkt.hash != 0 {
        pkt.hash
    } else {
        keyed_hash(key, &flow_keys(pkt)).max(1)
    }
}

/// The flow keys the kernel's dissector extracts (`skb_get_hash`): for IPv4/IPv6 the addresses, the L4
/// protocol and, unless the packet is a fragment, the ports of TCP, UDP, UDP-Lite, SCTP and DCCP. The two
/// directions of a connection give the same keys (`__flow_hash_consistentify`). A packet that cannot be
/// parsed (non-IP, truncated, IHL < 5) is keyed by its EtherType alone, so all of them share one flow.
pub fn flow_keys(pkt: &Packet) -> FlowKeys {
    let d = &pkt.data;
    let ports_of = |proto: u8, l4: usize| -> Option<(u16, u16)> {
        if !has_ports(proto) || d.len() < l4 + 4 {
            return None;
        }
        Some((
            u16::from_be_bytes([d[l4], d[l4 + 1]]),
            u16::from_be_bytes([d[l4 + 2], d[l4 + 3]]),
        ))
    };
    let fallback = FlowKeys::of(&[pkt.protocol as u64]);
    match pkt.protocol {
        0x0800 => {
            let Some(ip) = crate::wire::Ipv4::parse(d) else {
                return fallback;
            };
            let proto = ip.protocol();
            let ports = if ip.is_fragment() {
                None
            } else {
                ports_of(proto, ip.header_len())
            };
            ipv4_keys(proto, ip.src(), ip.dst(), ports)
        }
        0x86dd => {
            if d.len() < 40 || d[0] >> 4 != 6 {
                return fallback;
            }
            let word = |at: usize| u64::from_be_bytes(d[at..at + 8].try_into().unwrap_or([0; 8]));
            let proto = d[6];
            let ports = ports_of(proto, 40);
            consistent_keys(
                0x86dd,
                proto,
                &[word(8), word(16)],
                &[word(24), word(32)],
                ports,
            )
        }
        _ => fallback,
    }
}

/// Whether the dissector reads ports for this L4 protocol (TCP, UDP, UDP-Lite, SCTP, DCCP).
pub fn has_ports(proto: u8) -> bool {
    matches!(proto, 6 | 17 | 33 | 132 | 136)
}

/// An IPv4 packet's flow keys from its header's fields: `ports` as the dissector finds them (`None` for
/// a fragment, a protocol without ports, or a header cut before them). [`consistent_keys`] for
/// one-word addresses, without its slices (the per-packet path of every flow-queueing discipline): the
/// same words in the same order.
fn ipv4_keys(proto: u8, src: u32, dst: u32, ports: Option<(u16, u16)>) -> FlowKeys {
    let (mut a, mut b) = ((src as u64, 0), (dst as u64, 0));
    if let Some((sport, dport)) = ports {
        (a.1, b.1) = (sport, dport);
    }
    if a > b {
        std::mem::swap(&mut a, &mut b);
    }
    FlowKeys {
        words: [
            (0x0800 << 8) | proto as u64,
            a.0,
            b.0,
            ((a.1 as u64) << 16) | b.1 as u64,
            0,
            0,
        ],
        len: 4,
    }
}

/// The hash [`skb_get_hash`] gives an IPv4 packet whose header fields the caller holds (a driver making
/// the packet from them): the same keys as dissecting its bytes, without reading them back.
pub fn ipv4_flow_hash(
    key: [u64; 2],
    proto: u8,
    src: u32,
    dst: u32,
    ports: Option<(u16, u16)>,
) -> u32 {
    keyed_hash(key, &ipv4_keys(proto, src, dst, ports)).max(1)
}

fn consistent_keys(
    ethertype: u16,
    proto: u8,
    src: &[u64],
    dst: &[u64],
    ports: Option<(u16, u16)>,
) -> FlowKeys {
    let (mut a, mut b) = (src, dst);
    let (mut pa, mut pb) = ports.unwrap_or((0, 0));
    if (a, pa) > (b, pb) {
        std::mem::swap(&mut a, &mut b);
        std::mem::swap(&mut pa, &mut pb);
    }
    let mut keys = FlowKeys::of(&[((ethertype as u64) << 8) | proto as u64]);
    keys.extend(a);
    keys.extend(b);
    keys.extend(&[((pa as u64) << 16) | pb as u64]);
    keys
}

/// A packet's flow keys: at most six words (IPv6's protocol, two addresses of two words, ports), kept
/// inline so that hashing a packet allocates nothing. Reads as a slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowKeys {
    words: [u64; 6],
    len: usize,
}

impl FlowKeys {
    fn of(words: &[u64]) -> FlowKeys {
        let mut k = FlowKeys {
            words: [0; 6],
            len: 0,
        };
        k.extend(words);
        k
    }
    fn extend(&mut self, words: &[u64]) {
        let n = words.len().min(6 - self.len);
        self.words[self.len..self.len + n].copy_from_slice(&words[..n]);
        self.len += n;
    }
}

impl std::ops::Deref for FlowKeys {
    type Target = [u64];
    fn deref(&self) -> &[u64] {
        &self.words[..self.len]
    }
}

/// The source and destination addresses of an IPv4 or IPv6 packet, each prefixed by its family, for the
/// disciplines that isolate hosts rather than flows (CAKE's `srchost`, `dsthost`, `triple-isolate`).
/// `None` for a packet whose header cannot be read: the kernel's dissector then has no address, and such
/// packets share host 0.
pub fn host_addrs(pkt: &Packet) -> Option<([u64; 3], [u64; 3])> {
    let d = &pkt.data;
    match pkt.protocol {
        0x0800 if d.len() >= 20 && d[0] >> 4 == 4 => {
            let word =
                |at: usize| u32::from_be_bytes([d[at], d[at + 1], d[at + 2], d[at + 3]]) as u64;
            Some(([4, word(12), 0], [4, word(16), 0]))
        }
        0x86dd if d.len() >= 40 && d[0] >> 4 == 6 => {
            let word = |at: usize| u64::from_be_bytes(d[at..at + 8].try_into().unwrap_or([0; 8]));
            Some(([6, word(8), word(16)], [6, word(24), word(32)]))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `skb_get_hash` computes the keyed hash once and keeps it: a second key does not change it, and the
    /// value is the keyed hash of the flow keys (never 0); a hash already set is left alone.
    #[test]
    fn the_hash_is_computed_once_and_kept() {
        let mut p = Packet::udp4([10, 0, 0, 1], 1000, [10, 0, 0, 2], 2000, 0, 100);
        let h = skb_get_hash(&mut p, [1, 2]);
        assert_eq!(h, keyed_hash([1, 2], &flow_keys(&p)).max(1));
        assert_eq!((p.hash, skb_get_hash(&mut p, [3, 4])), (h, h));
        let mut q = Packet::udp4([10, 0, 0, 1], 1000, [10, 0, 0, 2], 2000, 0, 100);
        q.hash = 7;
        assert_eq!(skb_get_hash(&mut q, [1, 2]), 7);
        assert_ne!(
            keyed_hash([1, 2], &flow_keys(&q)),
            7,
            "the test's 7 is not the computed hash"
        );
    }

    /// IPv4's keys are built without `consistent_keys`' slices; they must be the words it builds, for
    /// every order of addresses and ports, with and without ports, so that no flow's hash changed.
    #[test]
    fn ipv4_keys_are_the_consistent_keys() {
        let addrs = [[10, 0, 0, 1], [10, 0, 0, 2], [192, 168, 1, 1]];
        let ports = [1, 80, 5001, 65535];
        for src in addrs {
            for dst in addrs {
                for sport in ports {
                    for dport in ports {
                        for (proto, frag) in [(17u8, false), (6, false), (1, false), (17, true)] {
                            let mut p = Packet::udp4(src, sport, dst, dport, 0, 100);
                            p.data[9] = proto;
                            if frag {
                                p.data[7] = 1; // fragment offset 8 bytes: no ports
                            }
                            let with_ports = !frag && proto != 1;
                            let expected = consistent_keys(
                                0x0800,
                                proto,
                                &[u32::from_be_bytes(src) as u64],
                                &[u32::from_be_bytes(dst) as u64],
                                with_ports.then_some((sport, dport)),
                            );
                            assert_eq!(
                                flow_keys(&p),
                                expected,
                                "{src:?}:{sport} > {dst:?}:{dport} proto {proto} frag {frag}"
                            );
                        }
                    }
                }
            }
        }
    }
}
