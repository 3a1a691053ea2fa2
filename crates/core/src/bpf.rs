//! Classic BPF (`net/core/filter.c`): the checker the kernel runs on a program before it accepts it
//! (`bpf_check_classic`, with `check_load_and_stores`) and an interpreter with the semantics of the
//! kernel's translation to eBPF (`bpf_convert_filter`), for cls_bpf's `bytecode '…'`.
//!
//! A program is at most 4096 instructions of `{code, jt, jf, k}`. It has an accumulator `A`, an index
//! register `X` and 16 scratch words; it reads the packet by absolute or `X`-relative offsets (bytes,
//! big-endian halves and words), and ends with `ret`. Every jump goes forward, so it always ends. The
//! checker refuses (`EINVAL`) an opcode outside the classic set, a division or modulo by the constant 0, a
//! constant shift of 32 or more, a scratch word out of range or read before every path to it wrote it, a
//! jump past the end, an ancillary load (`k` from `SKF_AD_OFF`) the kernel does not know, and a program
//! whose last instruction is no `ret`.
//!
//! What the program reads is the frame from its MAC header, as cls_bpf gives it at egress and (after
//! pushing the MAC header back) at ingress. A tclab packet starts at its network header, so the frame is
//! made of a 14-byte Ethernet header whose addresses are zeros (tclab packets carry none) and whose
//! EtherType is the packet's, the VLAN tags in its link header, then its bytes; payload it does not
//! materialise reads as zeros up to its length. A load that does not fit the frame ends the program
//! with 0, as do a division or modulo by `X` = 0 and the ancillary data tclab has no value for
//! (`ifindex` and `hatype`: the packet has no device here; `nlattr`, `nlattr_nest`, `pay_offset`,
//! `random`). The others: `protocol`, `pkttype` (0 at ingress, `PACKET_OUTGOING` on egress), `mark`,
//! `queue`, `rxhash` (0: tclab computes no skb hash), `cpu` (0), `vlan_tag`, `vlan_tag_present`,
//! `vlan_tpid`, and the `A ^= X` of `alu_xor_x`.

use crate::error::KernelError;
use crate::packet::Packet;

/// `struct sock_filter`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Insn {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

/// `BPF_MAXINSNS`.
pub const MAXINSNS: usize = 4096;
const MEMWORDS: u32 = 16;

// Instruction classes, sizes, modes, operations and sources (`linux/bpf_common.h`).
const LD: u16 = 0x00;
const LDX: u16 = 0x01;
const ST: u16 = 0x02;
const STX: u16 = 0x03;
const ALU: u16 = 0x04;
const JMP: u16 = 0x05;
const RET: u16 = 0x06;
const MISC: u16 = 0x07;
const W: u16 = 0x00;
const H: u16 = 0x08;
const B: u16 = 0x10;
const IMM: u16 = 0x00;
const ABS: u16 = 0x20;
const IND: u16 = 0x40;
const MEM: u16 = 0x60;
const LEN: u16 = 0x80;
const MSH: u16 = 0xa0;
const ADD: u16 = 0x00;
const SUB: u16 = 0x10;
const MUL: u16 = 0x20;
const DIV: u16 = 0x30;
const OR: u16 = 0x40;
const AND: u16 = 0x50;
const LSH: u16 = 0x60;
const RSH: u16 = 0x70;
const NEG: u16 = 0x80;
const MOD: u16 = 0x90;
const XOR: u16 = 0xa0;
const JA: u16 = 0x00;
const JEQ: u16 = 0x10;
const JGT: u16 = 0x20;
const JGE: u16 = 0x30;
const JSET: u16 = 0x40;
const K: u16 = 0x00;
const X: u16 = 0x08;
const RET_A: u16 = 0x10;
const TAX: u16 = 0x00;
const TXA: u16 = 0x80;

/// `SKF_AD_OFF`, `SKF_NET_OFF`, `SKF_LL_OFF` as the unsigned `k` holds them.
const SKF_AD_OFF: u32 = -0x1000i32 as u32;
const SKF_NET_OFF: u32 = -0x10_0000i32 as u32;
const SKF_LL_OFF: u32 = -0x20_0000i32 as u32;
/// The ancillary offsets the kernel knows (`bpf_anc_helper`): protocol, pkttype, ifindex, nlattr,
/// nlattr_nest, mark, queue, hatype, rxhash, cpu, alu_xor_x, vlan_tag, vlan_tag_present, pay_offset,
/// random, vlan_tpid.
const ANC: [u32; 16] = [0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60];
const PACKET_OUTGOING: u32 = 4;

/// `chk_code_allowed`.
fn code_allowed(code: u16) -> bool {
    let alu = |op: u16| [ALU | op | K, ALU | op | X];
    let jmp = |op: u16| [JMP | op | K, JMP | op | X];
    [ADD, SUB, MUL, DIV, MOD, AND, OR, XOR, LSH, RSH]
        .iter()
        .flat_map(|&op| alu(op))
        .chain([JEQ, JGE, JGT, JSET].iter().flat_map(|&op| jmp(op)))
        .chain([
            ALU | NEG,
            LD | W | ABS,
            LD | H | ABS,
            LD | B | ABS,
            LD | W | LEN,
            LD | W | IND,
            LD | H | IND,
            LD | B | IND,
            LD | IMM,
            LD | MEM,
            LDX | W | LEN,
            LDX | B | MSH,
            LDX | IMM,
            LDX | MEM,
            ST,
            STX,
            MISC | TAX,
            MISC | TXA,
            RET | K,
            RET | RET_A,
            JMP | JA,
        ])
        .any(|c| c == code)
}

fn is_cond_jump(code: u16) -> bool {
    code & 0x07 == JMP && code & 0xf0 != JA && code_allowed(code)
}

/// `bpf_check_basics_ok` and `bpf_check_classic`.
pub fn check_classic(prog: &[Insn]) -> Result<(), KernelError> {
    let bad = || Err(KernelError::new(crate::error::Errno::Invalid));
    let flen = prog.len();
    if flen == 0 || flen > MAXINSNS {
        return bad();
    }
    for (pc, i) in prog.iter().enumerate() {
        if !code_allowed(i.code) {
            return bad();
        }
        let ok = match i.code {
            c if c == ALU | DIV | K || c == ALU | MOD | K => i.k != 0,
            c if c == ALU | LSH | K || c == ALU | RSH | K => i.k < 32,
            c if c == LD | MEM || c == LDX | MEM || c == ST || c == STX => i.k < MEMWORDS,
            c if c == JMP | JA => (i.k as usize) < flen - pc - 1,
            c if is_cond_jump(c) => pc + i.jt as usize + 1 < flen && pc + i.jf as usize + 1 < flen,
            c if c == LD | W | ABS || c == LD | H | ABS || c == LD | B | ABS => {
                i.k < SKF_AD_OFF || ANC.contains(&i.k.wrapping_sub(SKF_AD_OFF))
            }
            _ => true,
        };
        if !ok {
            return bad();
        }
    }
    if prog[flen - 1].code != RET | K && prog[flen - 1].code != RET | RET_A {
        return bad();
    }
    check_load_and_stores(prog)
}

/// `check_load_and_stores`: a scratch word is read only where every path to the read wrote it.
fn check_load_and_stores(prog: &[Insn]) -> Result<(), KernelError> {
    let mut masks = vec![u16::MAX; prog.len()];
    let mut valid: u16 = 0;
    for (pc, i) in prog.iter().enumerate() {
        valid &= masks[pc];
        match i.code {
            c if c == ST || c == STX => valid |= 1 << i.k,
            c if (c == LD | MEM || c == LDX | MEM) && valid & (1 << i.k) == 0 => {
                return Err(KernelError::new(crate::error::Errno::Invalid));
            }
            c if c == JMP | JA => {
                masks[pc + 1 + i.k as usize] &= valid;
                valid = u16::MAX;
            }
            c if is_cond_jump(c) => {
                masks[pc + 1 + i.jt as usize] &= valid;
                masks[pc + 1 + i.jf as usize] &= valid;
                valid = u16::MAX;
            }
            _ => {}
        }
    }
    Ok(())
}

/// The frame a program reads (see the module's essay).
struct Frame<'a> {
    head: Vec<u8>,
    data: &'a [u8],
    len: usize,
}

impl Frame<'_> {
    fn new(pkt: &Packet) -> Frame<'_> {
        let mut head = vec![0u8; 12];
        for t in pkt.vlan_inline() {
            head.extend_from_slice(&t.proto.to_be_bytes());
            head.extend_from_slice(&t.tci.to_be_bytes());
        }
        head.extend_from_slice(&pkt.protocol.to_be_bytes());
        // The frame's length (`skb->len` with the MAC header): the packet's real length, which holds the
        // Ethernet header and the header tags; never less than the bytes there are.
        let real = pkt.wire_len().unwrap_or(pkt.len) as usize;
        let len = real.max(head.len() + pkt.data.len());
        Frame {
            head,
            data: &pkt.data,
            len,
        }
    }

    fn byte(&self, at: usize) -> u8 {
        if at < self.head.len() {
            self.head[at]
        } else {
            self.data.get(at - self.head.len()).copied().unwrap_or(0)
        }
    }

    /// `bpf_skb_load_helper_*`: `size` bytes big-endian at the signed offset `k`, or `None`.
    fn load(&self, k: u32, size: usize) -> Option<u32> {
        let at = if (SKF_LL_OFF..SKF_NET_OFF).contains(&k) {
            (k - SKF_LL_OFF) as usize
        } else if (SKF_NET_OFF..SKF_AD_OFF).contains(&k) {
            self.head.len() + (k - SKF_NET_OFF) as usize
        } else if (k as i32) < 0 {
            return None;
        } else {
            k as usize
        };
        if at + size > self.len {
            return None;
        }
        Some((0..size).fold(0u32, |v, i| v << 8 | self.byte(at + i) as u32))
    }
}

/// Run a checked program on a packet (`bpf_prog_run` of its translation). `at_ingress` decides
/// `pkttype`. Returns what the program returned (0 when it ended early).
pub fn run(prog: &[Insn], pkt: &Packet, at_ingress: bool) -> u32 {
    let f = Frame::new(pkt);
    let (mut a, mut x) = (0u32, 0u32);
    let mut mem = [0u32; MEMWORDS as usize];
    let mut pc = 0usize;
    while let Some(i) = prog.get(pc) {
        pc += 1;
        let cls = i.code & 0x07;
        let src = if i.code & X != 0 { x } else { i.k };
        match cls {
            LD | LDX => {
                let v = match i.code & 0xe0 {
                    IMM => i.k,
                    MEM => mem[i.k as usize],
                    LEN => f.len as u32,
                    MSH => match f.load(i.k, 1) {
                        Some(b) => (b & 0xf) << 2,
                        None => return 0,
                    },
                    mode => {
                        let size = match i.code & 0x18 {
                            W => 4,
                            H => 2,
                            _ => 1,
                        };
                        let k = if mode == IND {
                            x.wrapping_add(i.k)
                        } else {
                            i.k
                        };
                        if mode == ABS && k >= SKF_AD_OFF {
                            match ancillary(k - SKF_AD_OFF, pkt, a, x, at_ingress) {
                                Some(v) => v,
                                None => return 0,
                            }
                        } else {
                            match f.load(k, size) {
                                Some(v) => v,
                                None => return 0,
                            }
                        }
                    }
                };
                if cls == LD {
                    a = v;
                } else {
                    x = v;
                }
            }
            ST => mem[i.k as usize] = a,
            STX => mem[i.k as usize] = x,
            ALU => {
                a = match i.code & 0xf0 {
                    ADD => a.wrapping_add(src),
                    SUB => a.wrapping_sub(src),
                    MUL => a.wrapping_mul(src),
                    DIV if src == 0 => return 0,
                    DIV => a / src,
                    MOD if src == 0 => return 0,
                    MOD => a % src,
                    OR => a | src,
                    AND => a & src,
                    XOR => a ^ src,
                    LSH => a.wrapping_shl(src),
                    RSH => a.wrapping_shr(src),
                    NEG => a.wrapping_neg(),
                    _ => return 0,
                };
            }
            JMP => {
                let taken = match i.code & 0xf0 {
                    JA => {
                        pc += i.k as usize;
                        continue;
                    }
                    JEQ => a == src,
                    JGT => a > src,
                    JGE => a >= src,
                    _ => a & src != 0,
                };
                pc += if taken { i.jt } else { i.jf } as usize;
            }
            RET => return if i.code & RET_A != 0 { a } else { i.k },
            _ => {
                if i.code & 0xf8 == TXA {
                    a = x;
                } else {
                    x = a;
                }
            }
        }
    }
    0
}

/// The ancillary loads (`convert_bpf_extensions`); `None` ends the program with 0.
fn ancillary(off: u32, pkt: &Packet, a: u32, x: u32, at_ingress: bool) -> Option<u32> {
    Some(match off {
        0 => pkt.skb_protocol() as u32,
        4 => {
            if at_ingress {
                0
            } else {
                PACKET_OUTGOING
            }
        }
        20 => pkt.mark,
        24 => pkt.queue_mapping().unwrap_or(0) as u32,
        32 | 36 => 0,
        40 => a ^ x,
        44 => pkt.vlan().map_or(0, |t| t.tci as u32),
        48 => pkt.vlan().is_some() as u32,
        60 => pkt.vlan().map_or(0, |t| t.proto as u32),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Errno;

    fn p(ops: &[(u16, u8, u8, u32)]) -> Vec<Insn> {
        ops.iter()
            .map(|&(code, jt, jf, k)| Insn { code, jt, jf, k })
            .collect()
    }

    /// tdc's program: `ldh [12]; jeq #0x800, 0, 1; ret #0x40000; ret #0` (IPv4 → 4:0).
    fn ipv4_prog(ethertype: u32) -> Vec<Insn> {
        p(&[
            (40, 0, 0, 12),
            (21, 0, 1, ethertype),
            (6, 0, 0, 262144),
            (6, 0, 0, 0),
        ])
    }

    #[test]
    fn the_tdc_program_reads_the_ethertype_of_the_frame() {
        let prog = ipv4_prog(2048);
        check_classic(&prog).unwrap();
        let v4 = Packet::udp4([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, 0, 100);
        assert_eq!(run(&prog, &v4, false), 262144);
        let mut v6 = v4.clone();
        v6.protocol = 0x86dd;
        assert_eq!(run(&prog, &v6, false), 0);
        // 0x0806 (ARP) is not what an IPv4 packet carries.
        assert_eq!(run(&ipv4_prog(2054), &v4, false), 0);
    }

    #[test]
    fn loads_of_the_ip_header_and_by_x() {
        // ldx 4*([14]&0xf); ldh [x+16] (the UDP destination port); ret a.
        let prog = p(&[(0xb1, 0, 0, 14), (0x48, 0, 0, 16), (0x16, 0, 0, 0)]);
        check_classic(&prog).unwrap();
        let pkt = Packet::udp4([10, 0, 0, 1], 1111, [10, 0, 0, 2], 5353, 0, 100);
        assert_eq!(run(&prog, &pkt, true), 5353);
        // ld #len; ret a: the frame's length is the packet's.
        let len = p(&[(0x80, 0, 0, 0), (0x16, 0, 0, 0)]);
        assert_eq!(run(&len, &pkt, true), 100);
        // A load past the frame ends the program with 0.
        let far = p(&[(0x20, 0, 0, 200), (6, 0, 0, 1)]);
        assert_eq!(run(&far, &pkt, true), 0);
        // SKF_NET_OFF + 9: the IP protocol.
        let net = p(&[(0x30, 0, 0, SKF_NET_OFF + 9), (0x16, 0, 0, 0)]);
        assert_eq!(run(&net, &pkt, true), 17);
    }

    #[test]
    fn arithmetic_scratch_and_ancillary() {
        // ld mark; st M[3]; ldx #3; ld M[3]; div x; ret a  → mark / 3
        let prog = p(&[
            (0x20, 0, 0, SKF_AD_OFF + 20),
            (0x02, 0, 0, 3),
            (0x01, 0, 0, 3),
            (0x60, 0, 0, 3),
            (0x3c, 0, 0, 0),
            (0x16, 0, 0, 0),
        ]);
        check_classic(&prog).unwrap();
        let mut pkt = Packet::of_len(60);
        pkt.mark = 31;
        assert_eq!(run(&prog, &pkt, false), 10);
        // Division by X = 0 ends with 0.
        let div0 = p(&[(0x00, 0, 0, 5), (0x3c, 0, 0, 0), (6, 0, 0, 9)]);
        assert_eq!(run(&div0, &pkt, false), 0);
        // pkttype: outgoing on egress.
        let t = p(&[(0x30, 0, 0, SKF_AD_OFF + 4), (0x16, 0, 0, 0)]);
        assert_eq!((run(&t, &pkt, false), run(&t, &pkt, true)), (4, 0));
    }

    #[test]
    fn the_checker_refuses_what_the_kernel_refuses() {
        let e = |ops: &[(u16, u8, u8, u32)]| check_classic(&p(ops)).map_err(|e| e.errno);
        // tdc's invalid program: opcode 31.
        assert_eq!(
            e(&[
                (40, 0, 0, 12),
                (31, 0, 1, 2048),
                (6, 0, 0, 262144),
                (6, 0, 0, 0)
            ]),
            Err(Errno::Invalid)
        );
        assert!(e(&[]).is_err());
        // A conditional jump out of range; a `ja` to the end.
        assert!(e(&[(0x15, 2, 0, 1), (6, 0, 0, 0)]).is_err());
        assert!(e(&[(0x05, 0, 0, 1), (6, 0, 0, 0)]).is_err());
        // Division by the constant 0; a shift by 32; scratch word 16.
        assert!(e(&[(0x34, 0, 0, 0), (6, 0, 0, 0)]).is_err());
        assert!(e(&[(0x64, 0, 0, 32), (6, 0, 0, 0)]).is_err());
        assert!(e(&[(0x02, 0, 0, 16), (6, 0, 0, 0)]).is_err());
        // A read of a word one path did not write.
        assert!(e(&[
            (0x15, 0, 1, 1),
            (0x02, 0, 0, 0),
            (0x60, 0, 0, 0),
            (6, 0, 0, 0)
        ])
        .is_err());
        assert!(e(&[
            (0x02, 0, 0, 0),
            (0x15, 0, 0, 1),
            (0x60, 0, 0, 0),
            (6, 0, 0, 0)
        ])
        .is_ok());
        // An unknown ancillary offset; a program that does not end in ret.
        assert!(e(&[(0x20, 0, 0, SKF_AD_OFF + 64), (6, 0, 0, 0)]).is_err());
        assert!(e(&[(6, 0, 0, 0), (0x00, 0, 0, 1)]).is_err());
        assert!(e(&[(6, 0, 0, u32::MAX)]).is_ok());
    }
}
