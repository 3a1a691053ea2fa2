//! Delivery rate estimation (`net/ipv4/tcp_rate.c`, Linux 6.12), which BBR reads.
//!
//! Each segment sent remembers how much had been delivered then (`tx.delivered`), when
//! (`tx.delivered_mstamp`), and when the first segment of its flight went out (`tx.first_tx_mstamp`).
//! An ACK's *rate sample* takes the most recently sent segment it (S)ACKs: the packets delivered since
//! that segment was sent, over the longer of its send interval (from the flight's first send to its
//! own) and its ACK interval (from the delivery it saw to now) — a rate no faster than the bottleneck.
//! A sample shorter than the minimum RTT is dropped. A sample taken while the sender ran out of data
//! (*application-limited*: less than a segment to send, nothing queued below, room in cwnd) is marked
//! so, as it may understate the path.
//!
//! Times are microseconds (`tcp_mstamp`), from the simulator's nanoseconds.

use crate::{Connection, Nanos, TxSeg};

/// `struct rate_sample`: what one ACK measured.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RateSample {
    /// `tx.delivered_mstamp` of the sample's segment, µs; 0: no sample.
    pub prior_mstamp: u64,
    /// `tx.delivered` of the sample's segment.
    pub prior_delivered: u32,
    /// Packets delivered over the interval; -1 if invalid.
    pub delivered: i32,
    /// The interval, µs; -1 if invalid.
    pub interval_us: i64,
    /// RTT of the last (S)ACKed segment, µs; -1 if none.
    pub rtt_us: i64,
    /// Packets (S)ACKed by this ACK.
    pub acked_sacked: u32,
    /// Packets newly marked lost by this ACK.
    pub losses: u32,
    /// Packets in flight before this ACK.
    pub prior_in_flight: u32,
    pub is_app_limited: bool,
    pub is_retrans: bool,
    /// `FLAG_ACK_MAYBE_DELAYED`.
    pub is_ack_delayed: bool,
    /// `end_seq` of the sample's segment (ties in send time break on it).
    pub last_end_seq: u64,
}

impl Default for RateSample {
    fn default() -> RateSample {
        RateSample {
            prior_mstamp: 0,
            prior_delivered: 0,
            delivered: 0,
            interval_us: 0,
            rtt_us: -1,
            acked_sacked: 0,
            losses: 0,
            prior_in_flight: 0,
            is_app_limited: false,
            is_retrans: false,
            is_ack_delayed: false,
            last_end_seq: 0,
        }
    }
}

/// `tcp_mstamp`: microseconds.
pub(crate) fn us(t: Nanos) -> u64 {
    t / 1000
}

/// `tcp_rate_skb_delivered`: the segment `t` is (S)ACKed by this ACK; the most recently sent such
/// segment sets the sample `rs`. (A SACKed segment's `tx_delivered_mstamp` is then cleared by the
/// caller: it is not sampled again when cumulatively ACKed.) A function of the two fields it writes,
/// not of the connection: the SACK walk calls it on a retransmission queue entry it holds.
#[inline]
pub(crate) fn skb_delivered(rs: &mut RateSample, first_tx_mstamp: &mut u64, t: &TxSeg) {
    if t.tx_delivered_mstamp == 0 {
        return;
    }
    let tx = us(t.sent_at);
    let later = tx > *first_tx_mstamp || (tx == *first_tx_mstamp && t.seq_end() > rs.last_end_seq);
    if rs.prior_delivered == 0 || later {
        rs.prior_delivered = t.tx_delivered;
        rs.prior_mstamp = t.tx_delivered_mstamp;
        rs.is_app_limited = t.tx_app_limited;
        rs.is_retrans = t.retrans;
        rs.last_end_seq = t.seq_end();
        *first_tx_mstamp = tx;
        rs.interval_us = tx.saturating_sub(t.tx_first_tx_mstamp) as i64;
    }
}

impl Connection {
    /// `tcp_rate_skb_sent`: the segment at `i` (just sent, its `sent_at` its departure time) remembers
    /// the delivery state; `idle`: nothing was in flight before it (a new flight starts).
    pub(crate) fn rate_skb_sent(&mut self, i: usize, idle: bool) {
        let sent = us(self.rtx[i].sent_at);
        if idle {
            self.first_tx_mstamp = sent;
            self.delivered_mstamp = sent;
        }
        let t = &mut self.rtx[i];
        t.tx_first_tx_mstamp = self.first_tx_mstamp;
        t.tx_delivered_mstamp = self.delivered_mstamp;
        t.tx_delivered = self.delivered;
        t.tx_app_limited = self.app_limited != 0;
    }

    /// `tcp_rate_gen`: the ACK's sample, from the packets it delivered and the ones it marked lost.
    pub(crate) fn rate_gen(&mut self, now: Nanos, delivered: u32, lost: u32) {
        if self.app_limited != 0 && (self.delivered.wrapping_sub(self.app_limited) as i32) > 0 {
            self.app_limited = 0;
        }
        if delivered > 0 {
            self.delivered_mstamp = us(now);
        }
        let rs = &mut self.rs;
        rs.acked_sacked = delivered;
        rs.losses = lost;
        if rs.prior_mstamp == 0 {
            rs.delivered = -1;
            rs.interval_us = -1;
            return;
        }
        rs.delivered = self.delivered.wrapping_sub(rs.prior_delivered) as i32;
        // Sending and ACKing as two pipeline phases: the slower one bounds the rate.
        let snd_us = rs.interval_us;
        let ack_us = us(now).saturating_sub(rs.prior_mstamp) as i64;
        rs.interval_us = snd_us.max(ack_us);
        if rs.interval_us < (self.min_rtt / 1000) as i64 {
            rs.interval_us = -1;
        }
    }

    /// `tcp_rate_check_app_limited`, when the application writes: less than a segment left to send,
    /// nothing of ours below the socket, room in cwnd, no lost segment waiting: application-limited
    /// until what is in flight now is delivered.
    pub(crate) fn rate_check_app_limited(&mut self) {
        if self.write_end.saturating_sub(self.snd_nxt) < self.mss as u64
            && self.in_flight() < self.cwnd
            && self.lost_out <= self.retrans_out
        {
            let v = self.delivered.wrapping_add(self.in_flight());
            self.app_limited = if v == 0 { 1 } else { v };
        }
    }
}
