//! The send buffer (`net/ipv4/tcp.c`, `tcp_input.c` and `include/net/sock.h` of Linux 6.12): how much an
//! application may write ahead of what TCP has sent and had acknowledged, and when it waits.
//!
//! `sk_sndbuf` starts at `tcp_wmem[1]` (16 KB) and, once the connection is established
//! (`tcp_init_buffer_space`), becomes `tcp_sndbuf_expand`'s `factor × max(10, cwnd, reordering + 1) ×
//! per_mss` (factor 2, BBR's 3; `per_mss` the worst-case truesize of one segment's skb: 2 304 bytes for a
//! 1460-byte MSS on this machine's kernel), at most `tcp_wmem[2]` (4 MB). It grows again by the same
//! rule whenever a writer is waiting and the congestion window is not full (`tcp_new_space` /
//! `tcp_should_expand_sndbuf`), and never shrinks. `SO_SNDBUF` (`Config::sndbuf`) fixes it at twice its
//! value.
//!
//! What fills it is `sk_wmem_queued`: the truesize of every skb in the write queue (written, unsent)
//! and the retransmission queue (sent, unacknowledged) — each skb's data plus its head
//! (`SKB_TRUESIZE(MAX_TCP_HEADER)`, 832 bytes here). `tcp_sendmsg_locked` copies the application's bytes
//! into skbs of `size_goal` (whole MSS up to the GSO limit, one MSS without GSO), first topping up the
//! unsent tail skb, and allocates a new skb only while `sk_stream_memory_free`: `sk_wmem_queued <
//! sk_sndbuf` and the unsent bytes below `tcp_notsent_lowat` (unlimited by default). When it is not, the
//! write stops there (a non-blocking write returns short, as iperf3's do; a blocking one sleeps in
//! `sk_stream_wait_memory`), and the writer is woken — `poll`'s `EPOLLOUT` — only once the socket is
//! *writeable*: a third of the buffer free (`sk_stream_wspace >= sk_stream_min_wspace`: `sndbuf −
//! queued >= queued / 2`) and, with `notsent_lowat`, twice the unsent bytes below it.
//!
//! Every write that copied something ends with `tcp_push`, which sets PSH on the write queue's tail skb
//! (and `tcp_sendmsg_locked` pushes a full skb with PSH mid-write when half the peer's largest window
//! was written since the last push: `forced_push`). So a bulk sender's PSH marks fall where its writes
//! stop on a full buffer: one every third of a buffer, about every 12–18 segments for the 70–106 KB
//! buffers of this machine's iperf3 flows at 10 Mbit/s. A write whose skbs all leave during the write
//! (`tcp_push_one` sends each full skb as it fills) leaves no tail to mark. The mark travels with the
//! skb's last byte: to the last segment `tcp_write_xmit` cuts from it, and to that segment's
//! retransmissions.
//!
//! The write queue is kept as its skbs' ends (`WqSkb`), so segments never straddle two skbs, as
//! `tcp_write_xmit` never joins them: a write that completes in a short skb sends a short segment if
//! Nagle lets the last skb go. The retransmission queue's skbs are counted by marking each one's last
//! segment (`TxSeg::skb_end`); a retransmission of a segment inside a multi-segment skb splits it
//! (`tcp_fragment`).
//!
//! Not modelled: memory pressure (`tcp_memory_pressure`, `sk_forward_alloc`), autocorking
//! (`tcp_should_autocork`: a short tail held until a TX completion), zerocopy, `MSG_MORE`/`TCP_CORK`,
//! and the per-page fragment limits of the copy.

use crate::{CongestionControl, Connection, Nanos, PacingStatus, State};
use std::collections::VecDeque;

/// `MAX_TCP_HEADER` on this machine's kernel (6.18, `LL_MAX_HEADER` 32: `L1_CACHE_ALIGN(128 + 80)`);
/// 320 on kernels built with wireless or AX.25 (`LL_MAX_HEADER` 96/128). Measured through `ss -tmi`: a
/// CUBIC flow's `tb` is 2 × 2 304 × cwnd (`per_mss` below), its `w` 832 bytes per skb above its data.
const MAX_TCP_HEADER: u32 = 256;
/// `SKB_DATA_ALIGN(sizeof(struct skb_shared_info))` with 17 fragments, and `SKB_DATA_ALIGN(sizeof(struct
/// sk_buff))`, on x86-64.
const SHINFO_SIZE: u32 = 320;
const SKB_SIZE: u32 = 256;
/// What an skb `tcp_stream_alloc_skb` makes costs before data is copied into it:
/// `SKB_TRUESIZE(MAX_TCP_HEADER)` (the head from the small-head cache, `SKB_HEAD_ALIGN(MAX_TCP_HEADER)`).
pub(crate) const SKB_HEAD_TRUESIZE: u64 = (SKB_SIZE + SHINFO_SIZE + MAX_TCP_HEADER) as u64;
/// `SOCK_MIN_SNDBUF`: `2 × TCP_SKB_MIN_TRUESIZE` (2048 + the aligned `struct sk_buff`).
const SOCK_MIN_SNDBUF: u32 = 2 * (2048 + SKB_SIZE);
/// `TCP_INIT_CWND`: `tcp_sndbuf_expand` provisions at least ten segments.
const TCP_INIT_CWND: u32 = 10;

/// One skb of the write queue: where its data ends, and whether `tcp_push` marked it (PSH).
#[derive(Clone, Copy, Debug)]
pub(crate) struct WqSkb {
    pub(crate) end: u64,
    pub(crate) psh: bool,
}

/// The send buffer's state (`sk_sndbuf`, `SOCK_NOSPACE`, the write queue, `pushed_seq`), and a blocking
/// writer's bytes not yet copied.
#[derive(Clone, Debug)]
pub(crate) struct SndBuf {
    /// `sk_sndbuf`, bytes of truesize.
    pub(crate) sndbuf: u32,
    /// `SOCK_SNDBUF_LOCK`: the application set `SO_SNDBUF`; no autotuning.
    locked: bool,
    /// `tcp_wmem[2]`: the most autotuning gives.
    wmem_max: u32,
    /// `tcp_notsent_lowat`.
    notsent_lowat: u64,
    /// `SOCK_NOSPACE`: a writer found the socket full and waits for `sk_stream_write_space`.
    nospace: bool,
    /// The write queue's skbs, oldest first: unsent data from `snd_nxt` to `write_end`.
    pub(crate) wq: VecDeque<WqSkb>,
    /// `pushed_seq`: `write_seq` at the last PSH mark.
    pushed_seq: u64,
    /// Skbs in the retransmission queue (its segments with `skb_end`).
    pub(crate) rtx_skbs: u32,
    /// Bytes a blocking `write` has yet to copy (the writer sleeps in `sk_stream_wait_memory`).
    app_pending: u64,
    /// `close` came while a blocking write was still copying: the FIN follows its last byte.
    close_after_write: bool,
    /// An ACK was processed: `tcp_data_snd_check`'s `tcp_check_space` runs after the data it lets out.
    pub(crate) ack_check: bool,
}

impl SndBuf {
    pub(crate) fn new(cfg: &crate::Config) -> SndBuf {
        let locked = cfg.sndbuf != 0;
        let sndbuf = if locked {
            crate::sock_set_buf(cfg.sndbuf, cfg.wmem_max, SOCK_MIN_SNDBUF)
        } else {
            // tcp_init_sock().
            cfg.wmem[1]
        };
        SndBuf {
            sndbuf,
            locked,
            wmem_max: cfg.wmem[2],
            notsent_lowat: cfg.notsent_lowat as u64,
            nospace: false,
            wq: VecDeque::new(),
            pushed_seq: 0,
            rtx_skbs: 0,
            app_pending: 0,
            close_after_write: false,
            ack_check: false,
        }
    }
}

impl Connection {
    /// `tcp_sndbuf_expand`'s `per_mss`: the truesize of one segment's skb in the worst case (no GSO, the
    /// head kmalloc'ed in a power of two).
    fn sndbuf_per_mss(&self) -> u32 {
        let per_mss = self.mss_clamp.max(self.mss) + MAX_TCP_HEADER + SHINFO_SIZE;
        per_mss.next_power_of_two() + SKB_SIZE
    }

    /// `tcp_sndbuf_expand`: room for `factor × max(10, cwnd, reordering + 1)` such skbs (the module's
    /// `sndbuf_expand`, 3 for BBR, else 2: fast recovery's 1.7 rounded up), at most `tcp_wmem[2]`.
    fn sndbuf_expand(&mut self, factor: u32) {
        let nr_segs = self.cwnd.max(TCP_INIT_CWND).max(self.reordering + 1);
        let sndmem = factor as u64 * nr_segs as u64 * self.sndbuf_per_mss() as u64;
        if (self.snd.sndbuf as u64) < sndmem {
            self.snd.sndbuf = sndmem.min(self.snd.wmem_max as u64) as u32;
        }
    }

    /// `icsk_ca_ops->sndbuf_expand`: BBR's `bbr_sndbuf_expand` (3), else 2.
    fn sndbuf_factor(&self) -> u32 {
        if self.cfg.cc == CongestionControl::Bbr {
            3
        } else {
            2
        }
    }

    /// `tcp_init_buffer_space`'s first step, when the connection is established. A socket BBR
    /// initialised before the application chose another module (`Config::paced`) is expanded by
    /// BBR's factor: the module in place at establishment (this machine's iperf3 flows show `tb` 69 120
    /// = 3 × 10 × 2 304).
    pub(crate) fn init_sndbuf(&mut self) {
        if !self.snd.locked {
            let factor = if self.cfg.paced {
                3
            } else {
                self.sndbuf_factor()
            };
            self.sndbuf_expand(factor);
        }
    }

    /// `tcp_check_space` (after an ACK's data went out, and after each new data skb sent): if a writer
    /// waits, `tcp_new_space` grows the buffer while cwnd is not full (`tcp_should_expand_sndbuf`), and
    /// `sk_stream_write_space` wakes the writer once the socket is writeable.
    #[inline]
    pub(crate) fn check_space(&mut self) {
        if self.snd.nospace {
            self.check_space_nospace();
        }
    }

    /// `check_space` for a writer that found no space (out of line: the common call returns at once).
    #[inline(never)]
    fn check_space_nospace(&mut self) {
        if !self.snd.locked && self.in_flight() < self.cwnd {
            self.sndbuf_expand(self.sndbuf_factor());
        }
        if self.stream_writeable() {
            self.snd.nospace = false;
        }
    }

    /// `sk_wmem_queued`: the truesize of the write and retransmission queues' skbs.
    #[inline]
    pub(crate) fn wmem_queued(&self) -> u64 {
        let data = self.write_end.saturating_sub(self.snd_una.max(1));
        data + SKB_HEAD_TRUESIZE * (self.snd.wq.len() as u64 + self.snd.rtx_skbs as u64)
    }

    /// Written bytes not yet sent (`write_seq − snd_nxt`, `ss`'s `notsent`).
    #[inline]
    fn notsent_bytes(&self) -> u64 {
        self.write_end.saturating_sub(self.snd_nxt)
    }

    /// `__sk_stream_memory_free(sk, wake)`: another skb may be allocated (`wake` = 1: the unsent bytes
    /// count twice, as `tcp_stream_memory_free` counts them for a wake-up).
    #[inline]
    fn stream_memory_free(&self, wake: bool) -> bool {
        self.wmem_queued() < self.snd.sndbuf as u64
            && (self.notsent_bytes() << wake as u32) < self.snd.notsent_lowat
    }

    /// `__sk_stream_is_writeable(sk, 1)`: a third of the buffer free (`sk_stream_wspace >=
    /// sk_stream_min_wspace`) and memory free.
    #[inline]
    fn stream_writeable(&self) -> bool {
        let queued = self.wmem_queued();
        (self.snd.sndbuf as u64).saturating_sub(queued) >= queued / 2
            && self.stream_memory_free(true)
    }

    /// The application may write: established, not closed for sending.
    #[inline]
    fn may_write(&self) -> bool {
        matches!(self.state, State::Established | State::CloseWait) && !self.fin_queued
    }

    /// `poll`'s `EPOLLOUT` (`tcp_poll`): a write would copy something now, and the buffer has room for a
    /// third of itself. iperf3 writes only when this holds. Inline (with what it reads): a blocked iperf3
    /// asks after every segment its socket sends or is refused.
    #[inline]
    pub fn writable(&self) -> bool {
        self.may_write() && self.stream_writeable()
    }

    /// A non-blocking `write(2)` of `bytes` (`tcp_sendmsg_locked` with `MSG_DONTWAIT`): copies what the
    /// send buffer takes now and returns how many bytes that was — fewer than `bytes` when the buffer
    /// filled (`EAGAIN` after a short count). Nothing before the connection is established.
    pub fn try_write(&mut self, now: Nanos, bytes: u64) -> u64 {
        if !self.may_write() || bytes == 0 {
            return 0;
        }
        self.sendmsg(now, bytes)
    }

    /// The application writes `bytes` with a blocking `write(2)`: they are copied as the send buffer
    /// takes them — at the next `poll_transmit`, then whenever the sleeping writer is woken — each
    /// stretch ending with a push. Ignored after `close`.
    pub fn write(&mut self, bytes: u64) {
        if self.fin_queued
            || self.snd.close_after_write
            || matches!(self.state, State::Closed | State::TimeWait)
        {
            return;
        }
        self.snd.app_pending = self.snd.app_pending.saturating_add(bytes);
    }

    /// `close` during a blocking write: the FIN waits for the write's last byte (`Connection::close`).
    pub(crate) fn close_waits_for_write(&mut self) -> bool {
        if self.snd.app_pending > 0 {
            self.snd.close_after_write = true;
        }
        self.snd.app_pending > 0
    }

    /// The blocking writer copies more if it is not asleep (or was woken: `SOCK_NOSPACE` cleared).
    /// Returns whether it copied anything.
    #[inline]
    pub(crate) fn resume_writer(&mut self, now: Nanos) -> bool {
        if self.snd.app_pending == 0 || self.snd.nospace {
            return false;
        }
        self.resume_writer_copy(now)
    }

    /// The part of `resume_writer` that copies (out of line: most calls find no writer waiting).
    #[inline(never)]
    fn resume_writer_copy(&mut self, now: Nanos) -> bool {
        if !self.may_write() {
            return false;
        }
        let copied = self.sendmsg(now, self.snd.app_pending);
        self.snd.app_pending -= copied;
        if self.snd.app_pending == 0 && std::mem::take(&mut self.snd.close_after_write) {
            self.close();
        }
        copied > 0
    }

    /// `tcp_sendmsg_locked`'s copy loop: top up the unsent tail skb, then new skbs of `size_goal` while
    /// memory is free; a short copy leaves the writer waiting (`SOCK_NOSPACE`). A stretch that copied
    /// anything ends with `tcp_push`'s PSH on the write queue's tail.
    fn sendmsg(&mut self, now: Nanos, bytes: u64) -> u64 {
        self.rate_check_app_limited();
        let size_goal = self.tso_size_goal() as u64 * self.mss.max(1) as u64;
        let mut copied = 0u64;
        while copied < bytes {
            let tail_start = match self.snd.wq.len() {
                0 => self.write_end,
                1 => self.snd_nxt,
                n => self.snd.wq[n - 2].end,
            };
            let room = match self.snd.wq.back() {
                Some(t) => (tail_start + size_goal).saturating_sub(t.end),
                None => 0,
            };
            if room == 0 {
                // new_segment: another skb only while memory is free.
                if !self.stream_memory_free(false) {
                    self.snd.nospace = true;
                    break;
                }
                self.snd.wq.push_back(WqSkb {
                    end: self.write_end,
                    psh: false,
                });
            }
            let skb_start = if room == 0 {
                self.write_end
            } else {
                tail_start
            };
            let copy = (bytes - copied).min(skb_start + size_goal - self.write_end);
            let tail = self.snd.wq.back_mut().unwrap_or_else(|| unreachable!());
            if copied == 0 {
                // A new write's first bytes take the tail's PSH away (`tcp_sendmsg_locked`).
                tail.psh = false;
            }
            tail.end += copy;
            let full = tail.end - skb_start >= size_goal;
            self.write_end += copy;
            self.written += copy;
            copied += copy;
            if copied < bytes && full && self.forced_push() {
                self.mark_push();
            }
        }
        // tcp_push(): PSH on the tail still in the write queue. A finished write's last skb is always
        // there (the copy loop pushes only full skbs with more to write); a stopped write's may have left
        // with the others.
        if copied == bytes || (copied > 0 && !self.push_sends_all(now)) {
            self.mark_push();
        }
        copied
    }

    /// `forced_push`: half the peer's largest window written since the last PSH.
    fn forced_push(&self) -> bool {
        self.write_end > self.snd.pushed_seq + (self.max_window >> 1)
    }

    /// `tcp_mark_push` on the write queue's tail.
    fn mark_push(&mut self) {
        if let Some(t) = self.snd.wq.back_mut() {
            t.psh = true;
        }
        self.snd.pushed_seq = self.write_end;
    }

    /// Whether a write stopped by a full buffer sent all it wrote as it went (`tcp_push_one` as each skb
    /// fills), leaving `tcp_push` no tail to mark: nothing holds the socket
    /// (local refusal, TSQ, pacing: a paced socket lets one skb go at a time), cwnd and the peer's window
    /// take it all, and Nagle lets a short tail go.
    fn push_sends_all(&self, now: Nanos) -> bool {
        let unsent = self.notsent_bytes();
        let mss = self.mss.max(1) as u64;
        let segs = unsent.div_ceil(mss);
        let paced = self.pacing_status == PacingStatus::Needed;
        if self.local_block
            || self.tsq_throttled
            || !self.can_send_data()
            || (paced && (self.wstamp > now || self.snd.wq.len() > 1))
        {
            return false;
        }
        let room = (self.snd_una + self.snd_wnd).saturating_sub(self.snd_nxt);
        let nagle =
            !unsent.is_multiple_of(mss) && self.packets_out > 0 && self.snd_sml > self.snd_una;
        unsent <= room && self.in_flight() as u64 + segs <= self.cwnd as u64 && !nagle
    }

    /// The send buffer's figures for `TcpStats`: `sk_sndbuf`, `sk_wmem_queued`, the unsent bytes.
    pub(crate) fn sndbuf_stats(&self) -> (u32, u64, u64) {
        (self.snd.sndbuf, self.wmem_queued(), self.notsent_bytes())
    }

    /// The write queue and the retransmission queue's skb count agree with the sequence numbers.
    pub(crate) fn check_sndbuf(&self) -> Result<(), String> {
        let marked = self.rtx.iter().filter(|t| t.skb_end).count() as u32;
        if marked != self.snd.rtx_skbs {
            return Err(format!("rtx_skbs {} != queue {marked}", self.snd.rtx_skbs));
        }
        // Data starts after the SYN's sequence number.
        let mut prev = self.snd_nxt.max(1);
        let n = self.snd.wq.len();
        for (k, s) in self.snd.wq.iter().enumerate() {
            // A FIN sent alone and refused by the qdisc is back as a skb with no data
            // (`tcp_send_fin`'s): the last one, at the end of what was written.
            let bare_fin =
                k + 1 == n && s.end == prev && s.end == self.write_end && self.fin_queued;
            if s.end <= prev && !bare_fin {
                return Err(format!("write queue skb ends at {} after {prev}", s.end));
            }
            prev = s.end;
        }
        if self.snd_nxt.max(1) < self.write_end && prev != self.write_end {
            return Err(format!(
                "write queue ends at {prev}, written to {}",
                self.write_end
            ));
        }
        Ok(())
    }
}
