//! Segmentation offload on the send side (`tcp_output.c` of Linux 6.12: `tcp_tso_autosize`,
//! `tcp_tso_segs`, `tcp_cwnd_test`, `tcp_mss_split_point`).
//!
//! Linux's TCP has built GSO skbs only since 4.19 ("tcp: switch to GSO being always on"): `sk_setup_caps`
//! gives every TCP socket `NETIF_F_GSO`, so a device's `ethtool -K … gso off tso off` moves the
//! segmentation after the qdisc (`validate_xmit_skb`) but does not change what TCP hands its qdisc. What
//! does is the route's device limits, copied into the socket at connect: `gso_max_size` (less
//! `MAX_TCP_HEADER + 1`) and `gso_max_segs` (`ip link set DEV gso_max_segs 1` makes every skb one MSS).
//!
//! How many segments go in one skb (`tcp_tso_segs`): about a millisecond of data at the pacing rate
//! (`sk_pacing_rate >> sk_pacing_shift`, shift 10), plus, on short paths, `gso_max_size >> (min_rtt_us
//! >> tcp_tso_rtt_log)` (log 9: a 64 KB skb below 512 µs, 32 KB below 1 ms, nothing from 16.4 ms), at
//! most `gso_max_size` bytes, at least `min_tso_segs` (2, or BBR's own) and at most `gso_max_segs`. Then
//! `tcp_write_xmit` gives one skb at most half the window (`tcp_cwnd_test`: two skbs in flight at least),
//! what remains of cwnd, and of the peer's window; a short last segment stays only if Nagle allows it
//! (`tcp_mss_split_point`). Before that, `tcp_tso_should_defer` may hold the skb back: when cwnd or the
//! peer's window leaves room for less than a full skb and less than a third of the window, the last
//! write was under a millisecond ago (`tcp_wstamp_ns`, ahead of now when paced) and an ACK is due
//! within min(srtt / 2, 1 ms), it waits for that ACK to send a fuller one. The write queue's skbs it
//! judges are `tcp_xmit_size_goal` long (`sk_gso_max_size` bounded to half the peer's largest window).
//!
//! Over a veth, whose peer receives the skbs whole and ACKs each, the deferral keeps them as large as
//! the kernel's (docs/KERNEL_VS_SIM.md, policy oh); over a NIC it changes how a queue fills in bursts
//! (EXPERIMENTS.md's RRUL with PIE).
//!
//! The retransmission queue keeps one entry per MSS (Linux fragments its skbs as SACKs and losses
//! split them), so SACK, RACK and the loss marking are unchanged; a retransmission is one MSS, as a lost
//! segment's is in Linux. Not modelled: multi-segment retransmissions and loss probes.

use crate::{CaState, Config, Connection, Nanos, MS, TCP_MSS_DEFAULT};

/// `sysctl_tcp_min_tso_segs`.
const MIN_TSO_SEGS: u32 = 2;
/// `sysctl_tcp_tso_win_divisor`.
const TSO_WIN_DIVISOR: u64 = 3;
/// `sysctl_tcp_tso_rtt_log`.
const TSO_RTT_LOG: u32 = 9;
/// `sk_pacing_shift`'s default: about 1 ms of data (2^-10 s) per skb.
const PACING_SHIFT: u32 = 10;
/// `MAX_TCP_HEADER + 1` on x86-64: what `sk_dst_gso_max_size` takes off the device's `gso_max_size`.
pub(crate) const GSO_HEADROOM: u32 = 321;
/// `GSO_LEGACY_MAX_SIZE`: the most an IPv4 socket takes of a device's `gso_max_size` (its
/// `gso_ipv4_max_size` unless BIG TCP raised it).
const GSO_LEGACY_MAX_SIZE: u32 = 65536;

impl Config {
    /// `sk_setup_caps` for a route through a device with `gso_max_size` and `gso_max_segs` (`ip link`'s):
    /// the socket's GSO limits (`sk_dst_gso_max_size` for IPv4; at least one segment).
    pub fn set_route_gso(&mut self, gso_max_size: u32, gso_max_segs: u32) {
        self.gso_max_size = gso_max_size
            .min(GSO_LEGACY_MAX_SIZE)
            .saturating_sub(GSO_HEADROOM)
            .max(1);
        self.gso_max_segs = gso_max_segs.max(1);
    }
}

impl Connection {
    /// `tcp_tso_segs`: the most segments one skb may carry now.
    pub fn tso_segs(&self) -> u32 {
        self.tso_segs_at(self.pacing_rate())
    }

    /// `tso_segs` at the pacing rate `pacing_rate` (`pacing_rate()`, which a caller already has).
    pub(crate) fn tso_segs_at(&self, pacing_rate: u64) -> u32 {
        let min_tso = if self.ca_is_bbr() {
            self.bbr_min_tso_segs()
        } else {
            MIN_TSO_SEGS
        };
        // tcp_xmit_size_goal: sendmsg builds skbs of as many whole MSS as sk_gso_max_size holds, one at
        // least; tcp_write_xmit splits them but never joins them, so min_tso_segs cannot make one larger
        // (a gso_max_size below two segments sends one MSS per skb).
        let size_goal = (self.cfg.gso_max_size / self.mss.max(1)).max(1);
        self.tso_autosize(min_tso, pacing_rate)
            .min(size_goal)
            .min(self.cfg.gso_max_segs.max(1))
    }

    /// `tcp_xmit_size_goal`: the segments of the skbs `tcp_sendmsg` builds in the write queue, as many as
    /// `sk_gso_max_size` holds bounded to half the peer's largest window (`tcp_bound_to_half_wnd`), at
    /// most `gso_max_segs`, one at least.
    pub(crate) fn tso_size_goal(&self) -> u32 {
        let mut bytes = self.cfg.gso_max_size as u64;
        let cutoff = if self.max_window > TCP_MSS_DEFAULT as u64 {
            self.max_window >> 1
        } else {
            self.max_window
        };
        if cutoff > 0 && bytes > cutoff {
            bytes = cutoff;
        }
        ((bytes / self.mss.max(1) as u64) as u32)
            .min(self.cfg.gso_max_segs)
            .max(1)
    }

    /// `tcp_tso_autosize`.
    fn tso_autosize(&self, min_tso_segs: u32, pacing_rate: u64) -> u32 {
        let max_size = self.cfg.gso_max_size as u64;
        // A pacing rate of 0 is the kernel's ~0UL (no RTT yet): the size limit decides.
        let mut bytes = match pacing_rate {
            0 => max_size,
            r => r >> PACING_SHIFT,
        };
        // `tcp_min_rtt` in µs; ~0U before any sample.
        let min_rtt_us = if self.min_rtt == 0 {
            u32::MAX as u64
        } else {
            self.min_rtt / 1000
        };
        let r = min_rtt_us >> TSO_RTT_LOG;
        if r < 32 {
            bytes += max_size >> r;
        }
        let bytes = bytes.min(max_size);
        ((bytes / self.mss.max(1) as u64) as u32).max(min_tso_segs)
    }

    /// `tcp_tso_should_defer` (Linux 6.12): whether to hold back the skb at `snd_nxt`, of `skb_len`
    /// bytes (several segments; `tail`: the last in the write queue), for an ACK expected soon to let a
    /// fuller one go, rather than send the part of it that cwnd and the peer's window (`room`) allow
    /// now. No timer: that ACK sends it. `Some(is_cwnd_limited)` to defer, `None` to send now. `segs` is
    /// `tso_segs()`, which the caller has.
    pub(crate) fn tso_should_defer(
        &self,
        now: Nanos,
        skb_len: u64,
        room: u64,
        tail: bool,
        segs: u32,
    ) -> Option<bool> {
        if self.ca_state >= CaState::Recovery {
            return None;
        }
        // Only if the last write was recent (1 ms): `tcp_wstamp_ns` may be ahead of now when paced.
        if now > self.wstamp + MS {
            return None;
        }
        let in_flight = self.in_flight();
        if self.cwnd <= in_flight {
            return None;
        }
        let mss = self.mss as u64;
        let send_win = room;
        let cong_win = (self.cwnd - in_flight) as u64 * mss;
        let limit = send_win.min(cong_win);
        // A full-sized TSO skb can go.
        if limit >= segs as u64 * mss {
            return None;
        }
        // In the middle of the queue it will get no more data: all of it can go.
        if !tail && limit >= skb_len {
            return None;
        }
        // At least a third of the window (`tcp_tso_win_divisor`) is available.
        let chunk = self.snd_wnd.min(self.cwnd as u64 * mss) / TSO_WIN_DIVISOR;
        if limit >= chunk {
            return None;
        }
        // The next ACK, expected an srtt after the oldest segment out left, comes too late: in more
        // than min(srtt / 2, 1 ms).
        let head = self.rtx.front()?;
        let srtt = self.srtt8 >> 3;
        let how_far = (head.sent_at + srtt) as i128 - now as i128;
        if how_far > (srtt >> 1).min(MS) as i128 {
            return None;
        }
        if cong_win < send_win {
            if cong_win <= skb_len {
                return Some(true);
            }
        } else if send_win <= skb_len {
            return Some(false);
        }
        // Application-limited: wait, unless the skb carries the FIN (it will get no more data).
        (!(self.fin_queued && tail)).then_some(false)
    }

    /// How many bytes the skb that starts at `snd_nxt` takes (`tcp_write_xmit`), given that its first
    /// full segment passed the window and Nagle tests: `avail` bytes are written and unsent, `room` is
    /// what the peer's window leaves. A multiple of the MSS unless the last, short segment may go now.
    /// `segs` is `tso_segs()`.
    pub(crate) fn tso_len(&self, avail: u64, room: u64, segs: u32) -> u64 {
        let mss = self.mss as u64;
        let cwnd = self.cwnd;
        let in_flight = self.in_flight();
        // tcp_cwnd_test: at least two skbs in flight.
        let quota = (cwnd >> 1).max(1).min(cwnd.saturating_sub(in_flight));
        let quota = quota.min(segs).max(1) as u64;
        let max_len = quota * mss;
        let needed = avail.min(room);
        if max_len <= needed {
            return max_len;
        }
        // tcp_mss_split_point: a short last segment goes only if Nagle lets it (tcp_nagle_check:
        // Minshall's rule, a sub-MSS segment still unacknowledged holds it back).
        let partial = needed % mss;
        if partial != 0 && self.packets_out > 0 && self.snd_sml > self.snd_una {
            return needed - partial;
        }
        needed
    }
}
