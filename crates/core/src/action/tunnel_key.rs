//! `tunnel_key` (`net/sched/act_tunnel_key.c`): attach or release the tunnel a packet is to be sent in.
//!
//! The action edits no byte. `set` gives the packet tunnel metadata (the kernel's metadata dst,
//! `ip_tunnel_info`: outer source and destination, key id, UDP destination port, TOS, TTL, checksum and
//! don't-fragment flags, Geneve/VXLAN/ERSPAN options), which a tunnel device in collect-metadata mode
//! would use to encapsulate the packet and a flower filter's `enc_*` keys match; `unset` releases
//! whatever the packet had (`skb_dst_drop`). In tclab the metadata is [`Packet::tunnel`]; no simulated
//! device encapsulates yet, and forwarding drops it as routing replaces the kernel's dst.

use super::Control;
use crate::error::{Errno, KernelError};
use crate::packet::Packet;
use std::net::IpAddr;

/// `TCA_TUNNEL_KEY_ACT_*`.
pub const ACT_SET: u32 = 1;
pub const ACT_RELEASE: u32 = 2;

/// `IP_TUNNEL_OPTS_MAX`: the options' room in `ip_tunnel_info`.
const OPTS_MAX: usize = 255;
/// `sizeof(struct geneve_opt)`.
const GENEVE_OPT_HLEN: usize = 4;

/// One Geneve option as tc sends it (`TCA_TUNNEL_KEY_ENC_OPT_GENEVE_*`, each part optional).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GeneveOpt {
    pub class: Option<u16>,
    pub kind: Option<u8>,
    pub data: Option<Vec<u8>>,
}

/// `TCA_TUNNEL_KEY_ENC_OPTS`: one family of options.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum TunnelOpts {
    Geneve(Vec<GeneveOpt>),
    Vxlan {
        gbp: u32,
    },
    /// ERSPAN version 1 carries an index, version 2 a direction and hardware id.
    Erspan {
        ver: u8,
        index: Option<u32>,
        dir: Option<u8>,
        hwid: Option<u8>,
    },
}

/// The tunnel a packet is to be sent in (`ip_tunnel_info` of its metadata dst).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TunnelInfo {
    pub src: IpAddr,
    pub dst: IpAddr,
    /// `tun_id` when `TUNNEL_KEY` is set.
    pub key_id: Option<u32>,
    /// `tp_dst`; 0 leaves the choice to the tunnel device.
    pub dst_port: u16,
    pub tos: u8,
    pub ttl: u8,
    /// `TUNNEL_CSUM`: the outer UDP checksum is computed.
    pub csum: bool,
    /// `TUNNEL_DONT_FRAGMENT`.
    pub dont_fragment: bool,
    pub opts: Option<TunnelOpts>,
}

/// What tc sends: `struct tc_tunnel_key`'s `t_action` and the `TCA_TUNNEL_KEY_*` attributes.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TunnelKey {
    pub action: Control,
    /// `TCA_TUNNEL_KEY_ACT_*`; 0 when the command named none (the kernel refuses it).
    pub op: u32,
    pub src: Option<IpAddr>,
    pub dst: Option<IpAddr>,
    pub key_id: Option<u32>,
    pub dst_port: Option<u16>,
    pub opts: Option<TunnelOpts>,
    /// `TCA_TUNNEL_KEY_NO_CSUM` (tc always sends it).
    pub no_csum: bool,
    /// `TCA_TUNNEL_KEY_NO_FRAG`.
    pub no_frag: bool,
    pub tos: Option<u8>,
    pub ttl: Option<u8>,
}

impl TunnelKey {
    /// `tunnel_key_init`'s checks, the options' (`tunnel_key_copy_opts`) included.
    pub fn validate(&self) -> Result<(), KernelError> {
        match self.op {
            ACT_RELEASE => Ok(()),
            ACT_SET => {
                if let Some(o) = &self.opts {
                    opts_len(o)?;
                }
                self.info().map(|_| ())
            }
            _ => Err(KernelError::invalid("Unknown tunnel key action")),
        }
    }

    /// The metadata a `set` attaches: both addresses of one family, or the kernel's refusal.
    pub fn info(&self) -> Result<TunnelInfo, KernelError> {
        let (src, dst) = match (self.src, self.dst) {
            (Some(s @ IpAddr::V4(_)), Some(d @ IpAddr::V4(_)))
            | (Some(s @ IpAddr::V6(_)), Some(d @ IpAddr::V6(_))) => (s, d),
            _ => {
                return Err(KernelError::invalid(
                    "Missing either ipv4 or ipv6 src and dst",
                ))
            }
        };
        Ok(TunnelInfo {
            src,
            dst,
            key_id: self.key_id,
            dst_port: self.dst_port.unwrap_or(0),
            tos: self.tos.unwrap_or(0),
            ttl: self.ttl.unwrap_or(0),
            csum: !self.no_csum,
            dont_fragment: self.no_frag,
            opts: self.opts.clone(),
        })
    }

    /// `tunnel_key_act`: attach (`set`) or release (`unset`) the metadata; the packet's bytes stay.
    pub fn act(&self, pkt: &mut Packet) -> Control {
        let tunnel = match self.op {
            ACT_SET => self.info().ok(),
            _ => None,
        };
        pkt.set_tunnel(tunnel);
        self.action
    }
}

/// `tunnel_key_copy_opts` without a destination: the options' length, or the kernel's refusal.
fn opts_len(o: &TunnelOpts) -> Result<usize, KernelError> {
    let len = match o {
        TunnelOpts::Geneve(list) => {
            let mut len = 0;
            for g in list {
                let (Some(_), Some(_), Some(data)) = (g.class, g.kind, &g.data) else {
                    return Err(KernelError::invalid(
                        "Missing tunnel key geneve option class, type or data",
                    ));
                };
                if data.len() < 4 {
                    return Err(KernelError::msg(
                        Errno::Range,
                        "Tunnel key geneve option data is less than 4 bytes long",
                    ));
                }
                if data.len() % 4 != 0 {
                    return Err(KernelError::msg(
                        Errno::Range,
                        "Tunnel key geneve option data is not a multiple of 4 bytes long",
                    ));
                }
                len += GENEVE_OPT_HLEN + data.len();
                if len > OPTS_MAX {
                    return Err(KernelError::invalid("Tunnel options exceeds max size"));
                }
            }
            len
        }
        // `struct vxlan_metadata`.
        TunnelOpts::Vxlan { .. } => 4,
        TunnelOpts::Erspan {
            ver,
            index,
            dir,
            hwid,
        } => {
            match ver {
                1 if index.is_none() => {
                    return Err(KernelError::invalid(
                        "Missing tunnel key erspan option index",
                    ))
                }
                2 if dir.is_none() || hwid.is_none() => {
                    return Err(KernelError::invalid(
                        "Missing tunnel key erspan option dir or hwid",
                    ))
                }
                1 | 2 => {}
                _ => {
                    return Err(KernelError::invalid(
                        "Tunnel key erspan option ver is incorrect",
                    ))
                }
            }
            // `struct erspan_metadata`.
            8
        }
    };
    if len == 0 {
        return Err(KernelError::invalid("Empty list of tunnel options"));
    }
    Ok(len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::TC_ACT_PIPE;
    use std::net::Ipv4Addr;

    fn set() -> TunnelKey {
        TunnelKey {
            action: TC_ACT_PIPE,
            op: ACT_SET,
            src: Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1))),
            dst: Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2))),
            key_id: Some(42),
            dst_port: Some(4789),
            opts: None,
            no_csum: false,
            no_frag: false,
            tos: None,
            ttl: None,
        }
    }

    fn geneve(data: &[u8]) -> TunnelOpts {
        TunnelOpts::Geneve(vec![GeneveOpt {
            class: Some(0x0102),
            kind: Some(0x80),
            data: Some(data.to_vec()),
        }])
    }

    #[test]
    fn set_attaches_the_tunnel_and_unset_releases_it_bytes_untouched() {
        let mut p = Packet::udp4([192, 168, 0, 1], 1, [192, 168, 0, 2], 2, 0, 200);
        let bytes = p.data.clone();
        assert_eq!(set().act(&mut p), TC_ACT_PIPE);
        let t = p.tunnel().expect("metadata attached");
        assert_eq!(
            (t.key_id, t.dst_port, t.csum, t.dst),
            (Some(42), 4789, true, IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)))
        );
        let mut unset = set();
        unset.op = ACT_RELEASE;
        unset.act(&mut p);
        assert_eq!((p.ext.is_none(), &p.data), (true, &bytes));
    }

    #[test]
    fn kernel_refusals() {
        let msg = |t: TunnelKey| t.validate().unwrap_err().to_string();
        let mut t = set();
        t.src = None;
        assert_eq!(msg(t), "Error: Missing either ipv4 or ipv6 src and dst.");
        let mut t = set();
        t.dst = Some("::1".parse().unwrap());
        assert!(
            msg(t).contains("Missing either ipv4 or ipv6"),
            "mixed families"
        );
        let mut t = set();
        t.opts = Some(geneve(&[0x42, 0x88]));
        assert!(msg(t.clone()).contains("less than 4 bytes"));
        t.opts = Some(geneve(&[1, 2, 3, 4, 5]));
        assert!(msg(t.clone()).contains("not a multiple of 4"));
        t.opts = Some(geneve(&[0; 252]));
        assert!(msg(t.clone()).contains("exceeds max size"), "4 + 252 > 255");
        t.opts = Some(geneve(&[0; 248]));
        assert!(t.validate().is_ok(), "4 + 248 fits");
        t.opts = Some(TunnelOpts::Geneve(vec![GeneveOpt {
            class: Some(1),
            kind: Some(2),
            data: None,
        }]));
        assert!(msg(t.clone()).contains("class, type or data"));
        t.opts = Some(TunnelOpts::Erspan {
            ver: 3,
            index: None,
            dir: None,
            hwid: None,
        });
        assert!(msg(t).contains("ver is incorrect"));
        let mut none = set();
        none.op = 0;
        assert!(msg(none).contains("Unknown tunnel key action"));
    }
}
