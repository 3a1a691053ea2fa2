//! The receive buffer and the window it lets the receiver offer (`net/ipv4/tcp_input.c` and
//! `tcp_output.c` of Linux 6.12): `sk_rcvbuf` starts at `tcp_rmem[1]` and grows by dynamic right-sizing
//! (`tcp_rcv_space_adjust`: twice what the application read in the last receiver-measured RTT, plus the
//! sender's growth) up to `tcp_rmem[2]`; the window clamp follows it as `tcp_win_from_space` (the
//! payload share of the buffer, `scaling_ratio`/256, measured on the first full-sized segment);
//! `rcv_ssthresh` opens the advertised window two segments per data segment (`tcp_grow_window`) up to
//! the clamp and the free space. The window scale is picked from the largest buffer the socket could
//! reach (`tcp_select_initial_window`). `SO_RCVBUF` (`Config::rcvbuf`) fixes the buffer at twice its
//! value, as `sock_setsockopt` does, and turns the growth off.
//!
//! Memory is counted in window bytes converted by the scaling ratio (`tcp_space_from_win`), not per
//! skb; queue collapsing and pruning (`tcp_prune_queue`, `tcp_clamp_window`) and memory pressure are not
//! modelled: a sender that respects the window never overflows the buffer.

use crate::{Config, Connection, Nanos, TS_OPTLEN};

/// `TCP_RMEM_TO_WIN_SCALE`: the scaling ratio is in 1/256ths.
const TCP_RMEM_TO_WIN_SCALE: u32 = 8;
/// `TCP_DEFAULT_SCALING_RATIO`: half the buffer is payload until a full-sized segment is measured.
const TCP_DEFAULT_SCALING_RATIO: u32 = 1 << (TCP_RMEM_TO_WIN_SCALE - 1);
/// `SOCK_MIN_RCVBUF` (`TCP_SKB_MIN_TRUESIZE`: 2048 + the aligned `struct sk_buff`).
const SOCK_MIN_RCVBUF: u32 = 2048 + 256;
/// `TCP_INIT_CWND`: the first `rcvq_space.space` is ten segments.
const TCP_INIT_CWND: u32 = 10;
/// `TCP_MAX_WSCALE`.
const TCP_MAX_WSCALE: u8 = 14;
/// `sysctl_tcp_app_win` (31): the share of the window kept for the application's buffer overhead.
const TCP_APP_WIN: u32 = 31;
/// What a received segment's skb costs beyond its payload (truesize − len). Chosen so that a
/// 1448-byte segment gives the scaling ratio this machine's kernel (6.18) measures over veth: a long
/// iperf3 flow's `rcv_ssthresh` levels at 3 929 315 of `rb` 4 458 589 (`ss -tmi`), 226/256; 1448·256 /
/// (1448 + 192) = 226.
const RCV_TRUESIZE_OVERHEAD: u32 = 192;

/// The receive buffer's state (`sk_rcvbuf`, `window_clamp`, `rcv_ssthresh`, `scaling_ratio`,
/// `rcvq_space`, `rcv_rtt_est`).
#[derive(Clone, Debug)]
pub(crate) struct RcvBuf {
    /// `sk_rcvbuf`, bytes of truesize.
    pub(crate) rcvbuf: u32,
    /// `SOCK_RCVBUF_LOCK`: the application set `SO_RCVBUF`; no autotuning.
    locked: bool,
    /// `tcp_rmem` and `rmem_max`.
    rmem: [u32; 3],
    rmem_max: u32,
    /// The largest window this end will offer.
    pub(crate) window_clamp: u32,
    /// The window offered so far may grow to this (slow start of the advertised window).
    pub(crate) rcv_ssthresh: u32,
    /// `skb->len / skb->truesize` in 1/256ths.
    scaling_ratio: u32,
    /// The MSS this end advertised, less the timestamp option when in use (`tp->advmss`).
    advmss: u32,
    /// `rcvq_space.space`: bytes read in the last measured RTT (at least the initial window).
    pub(crate) space: u32,
    /// `rcvq_space.seq` as bytes read, and `rcvq_space.time` in µs.
    space_seq: u64,
    space_time_us: u64,
    /// `rcv_rtt_est.rtt_us` (×8), 0 before a sample; the window-based measurement's end and start.
    pub(crate) rtt_us8: u32,
    rtt_seq: u64,
    rtt_time_us: u64,
    /// `rcv_rtt_last_tsecr`.
    last_tsecr: u32,
}

impl RcvBuf {
    pub(crate) fn new(cfg: &Config) -> RcvBuf {
        let locked = cfg.rcvbuf != 0;
        let rcvbuf = if locked {
            crate::sock_set_buf(cfg.rcvbuf, cfg.rmem_max, SOCK_MIN_RCVBUF)
        } else {
            cfg.rmem[1]
        };
        RcvBuf {
            rcvbuf,
            locked,
            rmem: cfg.rmem,
            rmem_max: cfg.rmem_max,
            window_clamp: 0,
            rcv_ssthresh: 0,
            scaling_ratio: TCP_DEFAULT_SCALING_RATIO,
            advmss: cfg.mss,
            space: 0,
            space_seq: 0,
            space_time_us: 0,
            rtt_us8: 0,
            rtt_seq: 0,
            rtt_time_us: 0,
            last_tsecr: 0,
        }
    }

    /// `tcp_win_from_space()`.
    pub(crate) fn win_from_space(&self, space: i64) -> i64 {
        (space * self.scaling_ratio as i64) >> TCP_RMEM_TO_WIN_SCALE
    }

    /// `tcp_space_from_win()`.
    fn space_from_win(&self, win: u64) -> u64 {
        (win << TCP_RMEM_TO_WIN_SCALE) / self.scaling_ratio as u64
    }

    /// `tcp_full_space()`.
    pub(crate) fn full_space(&self) -> i64 {
        self.win_from_space(self.rcvbuf as i64)
    }

    /// `tcp_select_initial_window()` for a SYN or SYN-ACK offering `mss`-byte segments: the initial
    /// window (what the buffer holds, in whole segments), the window scale and the clamp. Returns the
    /// window and the scale.
    pub(crate) fn select_initial_window(&mut self, mss: u32, wscale_ok: bool) -> (u32, u8) {
        let clamp = if self.locked {
            self.full_space() as u32
        } else {
            u32::from(u16::MAX) << TCP_MAX_WSCALE
        };
        let mut space = (self.full_space().max(0) as u32).min(clamp);
        if space > mss {
            space = space / mss * mss;
        }
        let mut wscale = 0;
        if wscale_ok {
            let max = space.max(self.rmem[2]).max(self.rmem_max).min(clamp);
            wscale = (max.max(1).ilog2() as i32 - 15).clamp(0, TCP_MAX_WSCALE as i32) as u8;
        }
        self.window_clamp = (u32::from(u16::MAX) << wscale).min(clamp);
        self.rcv_ssthresh = space;
        (space, wscale)
    }
}

impl Connection {
    /// The MSS this end advertised, as the receive path counts it (`tp->advmss`, less the timestamp
    /// option once negotiated).
    pub(crate) fn advmss(&self) -> u32 {
        self.cfg
            .mss
            .saturating_sub(if self.ts_ok { TS_OPTLEN } else { 0 })
    }

    /// Bytes the receive queues hold (unread in order, and out of order).
    fn rcv_held(&self) -> u64 {
        self.unread + self.ooo.iter().map(|(s, e)| e - s).sum::<u64>()
    }

    /// `tcp_space()`: the window the free buffer is worth (negative when over-full).
    pub(crate) fn tcp_space(&self) -> i64 {
        let b = &self.rb;
        let rmem_alloc = b.space_from_win(self.rcv_held()) as i64;
        b.win_from_space(b.rcvbuf as i64 - rmem_alloc)
    }

    /// `tcp_init_buffer_space()`, when the connection is established: the clamp one segment short of
    /// what the buffer holds, the first space measurement (ten segments).
    pub(crate) fn init_buffer_space(&mut self, now: Nanos) {
        let advmss = self.advmss();
        let rcv_wnd = self.rcv_wnd_adv.min(u32::MAX as u64) as u32;
        let b = &mut self.rb;
        b.advmss = advmss;
        b.space_time_us = now / 1000;
        b.space_seq = self.bytes_read;
        let maxwin = b.full_space().max(0) as u32;
        if b.window_clamp >= maxwin {
            b.window_clamp = maxwin;
            if maxwin > 4 * advmss {
                b.window_clamp = (maxwin - (maxwin >> TCP_APP_WIN)).max(4 * advmss);
            }
        }
        // Force reservation of one segment.
        if b.window_clamp > 2 * advmss && b.window_clamp + advmss > maxwin {
            b.window_clamp = (2 * advmss).max(maxwin.saturating_sub(advmss));
        }
        b.rcv_ssthresh = b.rcv_ssthresh.min(b.window_clamp);
        b.space = b.rcv_ssthresh.min(rcv_wnd).min(TCP_INIT_CWND * advmss);
    }

    /// `tcp_measure_rcv_mss()`'s scaling ratio: a data segment longer than the MSS guess sets
    /// `scaling_ratio` from its len/truesize, and the clamp follows the buffer by it.
    pub(crate) fn measure_scaling_ratio(&mut self, len: u32) {
        if len <= self.rcv_mss {
            return;
        }
        let b = &mut self.rb;
        let ratio = ((len << TCP_RMEM_TO_WIN_SCALE) / (len + RCV_TRUESIZE_OVERHEAD)).max(1);
        if ratio != b.scaling_ratio {
            b.scaling_ratio = ratio;
            b.window_clamp = b.full_space().max(0) as u32;
            b.space = b.space.min(b.window_clamp);
        }
    }

    /// `tcp_rcv_rtt_update()`: a receiver RTT sample in µs; `win_dep` samples only lower it.
    fn rcv_rtt_update(&mut self, sample_us: u32, win_dep: bool) {
        let b = &mut self.rb;
        let old = b.rtt_us8;
        let m = sample_us.saturating_mul(8);
        b.rtt_us8 = if old == 0 || m < old {
            m
        } else if win_dep {
            return;
        } else {
            old - (old >> 3) + sample_us
        };
    }

    /// `tcp_rcv_rtt_measure()`: without timestamps, the time a window's worth of data takes to come in.
    pub(crate) fn rcv_rtt_measure(&mut self, now: Nanos) {
        let now_us = now / 1000;
        if self.rb.rtt_time_us != 0 {
            if self.rcv_nxt < self.rb.rtt_seq {
                return;
            }
            let delta = (now_us - self.rb.rtt_time_us).clamp(1, u32::MAX as u64) as u32;
            self.rcv_rtt_update(delta, true);
        }
        self.rb.rtt_seq = self.rcv_nxt + self.rcv_wnd_adv;
        self.rb.rtt_time_us = now_us.max(1);
    }

    /// `tcp_rcv_rtt_measure_ts()`: a full-sized segment echoing a new timestamp measures the RTT from it
    /// (millisecond ticks: an echo of this very tick gives no sample).
    #[inline]
    pub(crate) fn rcv_rtt_measure_ts(&mut self, now: Nanos, len: u64, tsecr: Option<u32>) {
        match tsecr {
            Some(tsecr) if self.ts_ok && tsecr != self.rb.last_tsecr => {
                self.rcv_rtt_measure_new_tsecr(now, len, tsecr)
            }
            _ => {}
        }
    }

    /// `rcv_rtt_measure_ts` for an echo it has not seen (out of line: most segments echo the last one).
    #[inline(never)]
    fn rcv_rtt_measure_new_tsecr(&mut self, now: Nanos, len: u64, tsecr: u32) {
        self.rb.last_tsecr = tsecr;
        if len >= self.rcv_mss as u64 {
            let delta_ms = Self::ts_now(now).wrapping_sub(tsecr);
            if delta_ms > 0 && delta_ms < i32::MAX as u32 / 1000 {
                self.rcv_rtt_update(delta_ms * 1000, false);
            }
        }
    }

    /// `tcp_grow_window()`: an in-order segment whose truesize the buffer can afford opens
    /// `rcv_ssthresh` by two segments, up to the clamp and the free space.
    pub(crate) fn grow_window(&mut self, len: u32) {
        let room =
            (self.rb.window_clamp as i64).min(self.tcp_space()) - self.rb.rcv_ssthresh as i64;
        if room <= 0 {
            return;
        }
        let b = &self.rb;
        let truesize = (len + RCV_TRUESIZE_OVERHEAD) as i64;
        let incr = if b.win_from_space(truesize) <= len as i64 {
            2 * b.advmss as i64
        } else {
            // __tcp_grow_window(): the buffer's largest window halved until the skb's share fits.
            let mut truesize = b.win_from_space(truesize) >> 1;
            let mut window = b.win_from_space(b.rmem[2] as i64) >> 1;
            let mut incr = 0;
            while b.rcv_ssthresh as i64 <= window {
                if truesize <= len as i64 {
                    incr = 2 * self.rcv_mss as i64;
                    break;
                }
                truesize >>= 1;
                window >>= 1;
            }
            incr
        };
        if incr > 0 {
            let incr = incr.max(2 * len as i64);
            self.rb.rcv_ssthresh += room.min(incr) as u32;
            self.quick = self.quick.max(1);
        }
    }

    /// `tcp_rcv_space_adjust()`, on every read: once a receiver RTT has passed since the last
    /// measurement, what the application read in it sets the buffer — twice that plus 16 segments, plus
    /// twice the growth since the previous RTT — capped at `tcp_rmem[2]`; the buffer never shrinks.
    pub(crate) fn rcv_space_adjust(&mut self, now: Nanos) {
        let now_us = now / 1000;
        let b = &self.rb;
        let time = now_us.saturating_sub(b.space_time_us);
        if b.rtt_us8 == 0 || time < (b.rtt_us8 >> 3) as u64 {
            return;
        }
        let copied = (self.bytes_read - b.space_seq) as i64 - self.unread as i64;
        if copied > b.space as i64 {
            if !b.locked {
                let space = b.space as u64;
                let copied = copied as u64;
                let mut rcvwin = (copied << 1) + 16 * b.advmss as u64;
                let grow = rcvwin * (copied - space) / space.max(1);
                rcvwin += grow << 1;
                let rcvbuf = b.space_from_win(rcvwin).min(b.rmem[2] as u64) as u32;
                if rcvbuf > b.rcvbuf {
                    let clamp = b.win_from_space(rcvbuf as i64) as u32;
                    self.rb.rcvbuf = rcvbuf;
                    self.rb.window_clamp = clamp;
                }
            }
            self.rb.space = copied as u32;
        }
        self.rb.space_seq = self.bytes_read;
        self.rb.space_time_us = now_us;
    }
}
