//! flower's tunnel option keys (`geneve_opts`, `vxlan_opts`, `erspan_opts`, `gtp_opts`) as
//! `cls_flower.c` keeps them: the options as the bytes of the tunnel's metadata
//! (`flow_dissector_key_enc_opts`: up to 255 bytes, their length, the family's flag bit), so that a
//! filter's key and mask and a packet's options compare byte for byte under the mask, length and
//! family included, as the masked-key memcmp does.
//!
//! - Geneve: the option TLVs as on the wire (class, type, a length byte counting 4-byte words, data).
//!   A filter's mask over an option is all ones unless tc sent one (`fl_set_geneve_opt`), its length
//!   byte the mask's own word count.
//! - VXLAN: `struct vxlan_metadata`'s group policy word (host order), under `VXLAN_GBP_MASK`.
//! - ERSPAN: `struct erspan_metadata`: the version (a host-order int), then version 1's index
//!   (big-endian) or version 2's direction and hardware id, bit fields of its last two bytes.
//! - GTP: `struct gtp_pdu_session_info`: PDU type, QFI.
//!
//! A packet's options are those a `tunnel_key set` attached (`skb_flow_dissect_tunnel_info`); no
//! tclab action attaches GTP's, so a `gtp_opts` filter matches only under a mask of zeros.

use crate::action::tunnel_key::{GeneveOpt, TunnelOpts};
use crate::error::{Errno, KernelError};

/// `IP_TUNNEL_OPTS_MAX` (= `FLOW_DIS_TUN_OPTS_MAX`).
pub const TUN_OPTS_MAX: usize = 255;
/// The families' flag bits (`IP_TUNNEL_*_OPT_BIT`, Linux 6.12), kept as `dst_opt_type`.
pub const GENEVE: u8 = 11;
pub const VXLAN: u8 = 12;
pub const ERSPAN: u8 = 14;
pub const GTP: u8 = 15;
/// `VXLAN_GBP_MASK`: the don't-learn and policy-applied bits and the 16-bit group id.
const VXLAN_GBP_MASK: u32 = (1 << 22) | (1 << 19) | 0xffff;
/// `sizeof(struct geneve_opt)`, `struct vxlan_metadata`, `struct erspan_metadata`,
/// `struct gtp_pdu_session_info`.
const GENEVE_HDR: usize = 4;
const VXLAN_LEN: usize = 4;
const ERSPAN_LEN: usize = 12;
const GTP_LEN: usize = 2;

/// `struct flow_dissector_key_enc_opts`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct EncOpts {
    #[serde(with = "crate::snapshot::zero_padded")]
    pub data: [u8; TUN_OPTS_MAX],
    pub len: u8,
    /// `dst_opt_type`: the family's flag bit, 0 for none.
    pub kind: u8,
}

impl Default for EncOpts {
    fn default() -> EncOpts {
        EncOpts {
            data: [0; TUN_OPTS_MAX],
            len: 0,
            kind: 0,
        }
    }
}

impl std::fmt::Debug for EncOpts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = usize::from(self.len).min(TUN_OPTS_MAX);
        write!(
            f,
            "EncOpts {{ kind: {}, data: {:02x?} }}",
            self.kind,
            &self.data[..n]
        )
    }
}

impl EncOpts {
    /// Every byte under the mask's.
    pub fn and(&self, m: &EncOpts) -> EncOpts {
        EncOpts {
            data: std::array::from_fn(|i| self.data[i] & m.data[i]),
            len: self.len & m.len,
            kind: self.kind & m.kind,
        }
    }

    /// `skb_flow_dissect_tunnel_info`'s options: the tunnel's metadata as its family lays it out.
    pub fn from_tunnel(opts: &TunnelOpts) -> EncOpts {
        let mut o = EncOpts::default();
        let mut put = |bytes: &[u8]| {
            let at = usize::from(o.len);
            if at + bytes.len() <= TUN_OPTS_MAX {
                o.data[at..at + bytes.len()].copy_from_slice(bytes);
                o.len += bytes.len() as u8;
            }
        };
        match opts {
            TunnelOpts::Geneve(list) => {
                for g in list {
                    let data = g.data.as_deref().unwrap_or(&[]);
                    let class = g.class.unwrap_or(0).to_be_bytes();
                    put(&[
                        class[0],
                        class[1],
                        g.kind.unwrap_or(0),
                        (data.len() / 4) as u8,
                    ]);
                    put(data);
                }
                o.kind = GENEVE;
            }
            TunnelOpts::Vxlan { gbp } => {
                put(&gbp.to_le_bytes());
                o.kind = VXLAN;
            }
            TunnelOpts::Erspan {
                ver,
                index,
                dir,
                hwid,
            } => {
                let mut md = [0u8; ERSPAN_LEN];
                md[..4].copy_from_slice(&i32::from(*ver).to_le_bytes());
                if *ver == 1 {
                    md[4..8].copy_from_slice(&index.unwrap_or(0).to_be_bytes());
                } else {
                    set_md2(&mut md, dir.unwrap_or(0), hwid.unwrap_or(0));
                }
                put(&md);
                o.kind = ERSPAN;
            }
        }
        o
    }
}

/// `erspan_md2`'s `dir` (bit 3 of its last byte) and `set_hwid` (the low 4 bits in that byte's top
/// half, the upper 2 in the bottom of the byte before), in `erspan_metadata`'s bytes.
fn set_md2(md: &mut [u8], dir: u8, hwid: u8) {
    md[10] = (md[10] & !0x03) | ((hwid >> 4) & 0x03);
    md[11] = (md[11] & !0xf8) | ((dir & 1) << 3) | ((hwid & 0x0f) << 4);
}

fn md2(md: &[u8]) -> (u8, u8) {
    ((md[11] >> 3) & 1, ((md[10] & 0x03) << 4) | (md[11] >> 4))
}

/// `erspan_opts VER:INDEX:DIR:HWID` as tc sends it: what the word gave.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ErspanSpec {
    pub ver: Option<u8>,
    pub index: Option<u32>,
    pub dir: Option<u8>,
    pub hwid: Option<u8>,
}

/// `TCA_FLOWER_KEY_ENC_OPTS` and `_MASK` as tc sends them: one family, the key's options and the
/// mask's (tc always sends a mask, all ones where the word gave none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EncOptsSpec {
    Geneve {
        key: Vec<GeneveOpt>,
        mask: Vec<GeneveOpt>,
    },
    Vxlan {
        key: u32,
        mask: u32,
    },
    Erspan {
        key: ErspanSpec,
        mask: ErspanSpec,
    },
    Gtp {
        key: [Option<u8>; 2],
        mask: [Option<u8>; 2],
    },
}

fn erange(msg: &str) -> KernelError {
    KernelError::msg(Errno::Range, msg)
}

/// `fl_set_geneve_opt`: one option into `o` (the key's when `option_len` is 0, else the mask's over
/// a key option of that length); its length.
fn set_geneve(o: &mut EncOpts, g: &GeneveOpt, option_len: usize) -> Result<usize, KernelError> {
    let mut data_len = option_len.saturating_sub(GENEVE_HDR);
    let at = usize::from(o.len);
    if at > TUN_OPTS_MAX - 4 {
        return Err(KernelError::new(Errno::Range));
    }
    o.data[at..(at + option_len).min(TUN_OPTS_MAX)].fill(0xff);
    o.data[at + 3] = (data_len / 4) as u8;
    if option_len == 0 && (g.class.is_none() || g.kind.is_none() || g.data.is_none()) {
        return Err(KernelError::invalid(
            "Missing tunnel key geneve option class, type or data",
        ));
    }
    if let Some(d) = &g.data {
        data_len = d.len();
        if data_len < 4 {
            return Err(erange(
                "Tunnel key geneve option data is less than 4 bytes long",
            ));
        }
        if !data_len.is_multiple_of(4) {
            return Err(erange(
                "Tunnel key geneve option data is not a multiple of 4 bytes long",
            ));
        }
        if at + GENEVE_HDR + data_len > TUN_OPTS_MAX {
            return Err(erange("Tunnel options exceeds max size"));
        }
        o.data[at + 3] = (data_len / 4) as u8;
        o.data[at + GENEVE_HDR..at + GENEVE_HDR + data_len].copy_from_slice(d);
    }
    if let Some(c) = g.class {
        o.data[at..at + 2].copy_from_slice(&c.to_be_bytes());
    }
    if let Some(t) = g.kind {
        o.data[at + 2] = t;
    }
    Ok(GENEVE_HDR + data_len)
}

/// `fl_set_erspan_opt`.
fn set_erspan(o: &mut EncOpts, e: &ErspanSpec, option_len: usize) -> Result<usize, KernelError> {
    let at = usize::from(o.len);
    let md = &mut o.data[at..at + ERSPAN_LEN];
    let key = option_len == 0;
    if key && e.ver.is_none() {
        return Err(KernelError::invalid("Missing tunnel key erspan option ver"));
    }
    let ver = e.ver.unwrap_or(1);
    md[..4].copy_from_slice(&i32::from(ver).to_le_bytes());
    match ver {
        1 => {
            if key && e.index.is_none() {
                return Err(KernelError::invalid(
                    "Missing tunnel key erspan option index",
                ));
            }
            let index = e.index.map_or([0xff; 4], u32::to_be_bytes);
            md[4..8].copy_from_slice(&index);
        }
        2 => {
            if key && (e.dir.is_none() || e.hwid.is_none()) {
                return Err(KernelError::invalid(
                    "Missing tunnel key erspan option dir or hwid",
                ));
            }
            set_md2(md, e.dir.unwrap_or(1), e.hwid.unwrap_or(0xff));
        }
        _ => {
            return Err(KernelError::invalid(
                "Tunnel key erspan option ver is incorrect",
            ))
        }
    }
    Ok(ERSPAN_LEN)
}

impl EncOptsSpec {
    /// `fl_set_enc_opt`: the key's options and the mask's, checked as the kernel checks them.
    pub fn set(&self, k: &mut EncOpts, m: &mut EncOpts) -> Result<(), KernelError> {
        let aligned = |k: &EncOpts, m: &EncOpts| {
            if k.len == m.len {
                Ok(())
            } else {
                Err(KernelError::invalid("Key and mask miss aligned"))
            }
        };
        match self {
            EncOptsSpec::Geneve { key, mask } => {
                (k.kind, m.kind) = (GENEVE, GENEVE);
                for (i, g) in key.iter().enumerate() {
                    let len = set_geneve(k, g, 0)?;
                    k.len += len as u8;
                    // Past the mask's options: all ones over the key's (no mask attribute).
                    let full = GeneveOpt {
                        class: None,
                        kind: None,
                        data: None,
                    };
                    let len = set_geneve(m, mask.get(i).unwrap_or(&full), len)?;
                    m.len += len as u8;
                    aligned(k, m)?;
                }
            }
            EncOptsSpec::Vxlan { key, mask } => {
                (k.kind, m.kind) = (VXLAN, VXLAN);
                k.data[..VXLAN_LEN].copy_from_slice(&(key & VXLAN_GBP_MASK).to_le_bytes());
                m.data[..VXLAN_LEN].copy_from_slice(&(mask & VXLAN_GBP_MASK).to_le_bytes());
                (k.len, m.len) = (VXLAN_LEN as u8, VXLAN_LEN as u8);
            }
            EncOptsSpec::Erspan { key, mask } => {
                (k.kind, m.kind) = (ERSPAN, ERSPAN);
                k.len = set_erspan(k, key, 0)? as u8;
                m.len = set_erspan(m, mask, ERSPAN_LEN)? as u8;
                aligned(k, m)?;
            }
            EncOptsSpec::Gtp { key, mask } => {
                (k.kind, m.kind) = (GTP, GTP);
                if key.iter().any(Option::is_none) {
                    return Err(KernelError::invalid(
                        "cls_flower: Missing tunnel key gtp option pdu type or qfi",
                    ));
                }
                for (o, v) in [(&mut *k, key), (&mut *m, mask)] {
                    o.data[0] = v[0].unwrap_or(0xff);
                    o.data[1] = v[1].unwrap_or(0xff);
                    o.len = GTP_LEN as u8;
                }
            }
        }
        Ok(())
    }
}

/// One family's options as `fl_dump_key_options` gives them back (key or mask).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DumpedOpts {
    /// (class, type, data) of each option.
    Geneve(Vec<(u16, u8, Vec<u8>)>),
    Vxlan(u32),
    /// Version, then index (version 1) or direction and hardware id (otherwise).
    Erspan {
        ver: u8,
        index: u32,
        dir: u8,
        hwid: u8,
    },
    Gtp {
        pdu_type: u8,
        qfi: u8,
    },
}

/// `fl_dump_key_options`: nothing without options.
pub fn dump(o: &EncOpts) -> Option<DumpedOpts> {
    let len = usize::from(o.len);
    if len == 0 {
        return None;
    }
    let d = &o.data;
    Some(match o.kind {
        GENEVE => {
            // fl_dump_key_geneve_opt: option after option by their length bytes.
            let mut list = Vec::new();
            let mut off = 0;
            while off + GENEVE_HDR <= len {
                let n = usize::from(d[off + 3] & 0x1f) * 4;
                let end = (off + GENEVE_HDR + n).min(TUN_OPTS_MAX);
                let class = u16::from_be_bytes([d[off], d[off + 1]]);
                list.push((class, d[off + 2], d[off + GENEVE_HDR..end].to_vec()));
                off += GENEVE_HDR + n;
            }
            DumpedOpts::Geneve(list)
        }
        VXLAN => DumpedOpts::Vxlan(u32::from_le_bytes([d[0], d[1], d[2], d[3]])),
        ERSPAN => {
            let ver = d[0];
            let (dir, hwid) = md2(&d[..ERSPAN_LEN]);
            DumpedOpts::Erspan {
                ver,
                index: if ver == 1 {
                    u32::from_be_bytes([d[4], d[5], d[6], d[7]])
                } else {
                    0
                },
                dir: if ver == 1 { 0 } else { dir },
                hwid: if ver == 1 { 0 } else { hwid },
            }
        }
        GTP => DumpedOpts::Gtp {
            pdu_type: d[0],
            qfi: d[1],
        },
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geneve(class: u16, kind: u8, data: &[u8]) -> GeneveOpt {
        GeneveOpt {
            class: Some(class),
            kind: Some(kind),
            data: Some(data.to_vec()),
        }
    }

    #[test]
    fn a_geneve_key_matches_the_options_a_tunnel_carries() {
        // geneve_opts 0102:80:00800022/ffff:ff:ffff0000: class, type and the data's first half.
        let spec = EncOptsSpec::Geneve {
            key: vec![geneve(0x0102, 0x80, &[0x00, 0x80, 0x00, 0x22])],
            mask: vec![geneve(0xffff, 0xff, &[0xff, 0xff, 0, 0])],
        };
        let (mut k, mut m) = (EncOpts::default(), EncOpts::default());
        spec.set(&mut k, &mut m).unwrap();
        assert_eq!(&k.data[..8], &[0x01, 0x02, 0x80, 1, 0x00, 0x80, 0x00, 0x22]);
        assert_eq!(&m.data[..8], &[0xff, 0xff, 0xff, 1, 0xff, 0xff, 0, 0]);
        let packet = |data: &[u8]| {
            EncOpts::from_tunnel(&TunnelOpts::Geneve(vec![geneve(0x0102, 0x80, data)]))
        };
        let hit = |p: EncOpts| p.and(&m) == k.and(&m);
        assert!(
            hit(packet(&[0x00, 0x80, 0x12, 0x34])),
            "the data's second half is masked out"
        );
        assert!(!hit(packet(&[0x00, 0x81, 0x00, 0x22])));
        // Another family, or no options, never matches.
        assert!(!hit(EncOpts::from_tunnel(&TunnelOpts::Vxlan {
            gbp: 0x800022
        })));
        assert!(!hit(EncOpts::default()));
        assert_eq!(
            dump(&k),
            Some(DumpedOpts::Geneve(vec![(
                0x0102,
                0x80,
                vec![0x00, 0x80, 0x00, 0x22]
            )]))
        );
    }

    #[test]
    fn the_kernels_geneve_refusals() {
        let set = |key: GeneveOpt| {
            let spec = EncOptsSpec::Geneve {
                key: vec![key.clone()],
                mask: vec![key],
            };
            spec.set(&mut EncOpts::default(), &mut EncOpts::default())
                .unwrap_err()
                .to_string()
        };
        assert!(set(geneve(1, 1, &[1, 2])).contains("less than 4 bytes long"));
        assert!(set(geneve(1, 1, &[1, 2, 3, 4, 5])).contains("not a multiple of 4 bytes"));
        let mut g = geneve(1, 1, &[1, 2, 3, 4]);
        g.kind = None;
        assert!(set(g).contains("Missing tunnel key geneve option class, type or data"));
        // Key and mask of different lengths.
        let spec = EncOptsSpec::Geneve {
            key: vec![geneve(1, 1, &[1, 2, 3, 4])],
            mask: vec![geneve(0xffff, 0xff, &[0xff; 8])],
        };
        let e = spec.set(&mut EncOpts::default(), &mut EncOpts::default());
        assert!(e
            .unwrap_err()
            .to_string()
            .contains("Key and mask miss aligned"));
    }

    #[test]
    fn vxlan_and_erspan_keys_match_their_tunnels() {
        let spec = EncOptsSpec::Vxlan {
            key: 0x800_0abc,
            mask: 0xffff_ffff,
        };
        let (mut k, mut m) = (EncOpts::default(), EncOpts::default());
        spec.set(&mut k, &mut m).unwrap();
        // VXLAN_GBP_MASK keeps the group id and two flag bits: 0x0800_0abc → 0x0abc.
        assert_eq!(dump(&k), Some(DumpedOpts::Vxlan(0x0abc)));
        assert_eq!(dump(&m), Some(DumpedOpts::Vxlan(VXLAN_GBP_MASK)));
        let hit = |p: EncOpts| p.and(&m) == k.and(&m);
        assert!(hit(EncOpts::from_tunnel(&TunnelOpts::Vxlan {
            gbp: 0x0abc
        })));
        assert!(!hit(EncOpts::from_tunnel(&TunnelOpts::Vxlan {
            gbp: 0x0abd
        })));
        // ERSPAN version 2, direction 1, hardware id 0x25 (both halves of the split field).
        let e = ErspanSpec {
            ver: Some(2),
            index: None,
            dir: Some(1),
            hwid: Some(0x25),
        };
        let spec = EncOptsSpec::Erspan { key: e, mask: e };
        let (mut k, mut m) = (EncOpts::default(), EncOpts::default());
        spec.set(&mut k, &mut m).unwrap();
        let p = EncOpts::from_tunnel(&TunnelOpts::Erspan {
            ver: 2,
            index: None,
            dir: Some(1),
            hwid: Some(0x25),
        });
        assert_eq!(p.and(&m), k.and(&m));
        assert_eq!(
            dump(&k),
            Some(DumpedOpts::Erspan {
                ver: 2,
                index: 0,
                dir: 1,
                hwid: 0x25
            })
        );
        let bad = ErspanSpec { ver: Some(3), ..e };
        let spec = EncOptsSpec::Erspan {
            key: bad,
            mask: bad,
        };
        let r = spec.set(&mut EncOpts::default(), &mut EncOpts::default());
        assert!(r
            .unwrap_err()
            .to_string()
            .contains("erspan option ver is incorrect"));
    }
}
