//! Pacing (Linux 6.12: `tcp_update_pacing_rate` in tcp_input.c; `tcp_update_skb_after_send`,
//! `tcp_pacing_check` and the departure stamps of `__tcp_transmit_skb` in tcp_output.c).
//!
//! Every TCP socket keeps a pacing rate, `sk_pacing_rate`: its current rate, cwnd × mss / srtt, times 2
//! in slow start (cwnd below half of ssthresh, or ssthresh not yet set) and times 1.2 after, capped by
//! `SO_MAX_PACING_RATE`. TCP small queues reads it (about a millisecond of data may sit below the socket)
//! and so does CUBIC's HyStart. Whether the socket is *paced* is `sk_pacing_status`:
//!
//! - `None` (the default for CUBIC, Reno and DCTCP): segments leave as fast as cwnd allows;
//! - `Fq`: a sch_fq with pacing on saw the socket's packet and paces it (it says so through the
//!   driver, [`Connection::set_paced_by_fq`]);
//! - `Needed`: pacing was asked for (`SO_MAX_PACING_RATE`, or a congestion control such as BBR — also
//!   one that initialised the socket before the application chose another, `Config::paced`) and no fq
//!   took it: TCP paces itself (*internal pacing*), holding data until its departure time.
//!
//! Linux uses departure times (EDT) either way: each segment leaves stamped with the socket's
//! `tcp_wstamp_ns` (never earlier than now) — which is also its send time for RTT samples and RACK
//! (`skb_mstamp_ns`), so time a paced segment waits is not counted as path delay —, which every data
//! segment sent pushes on by its payload's
//! time at the pacing rate — from the tenth data segment on (the first ten go unpaced, as the original
//! sch_fq let them) and less the time the socket was already late (up to half). sch_fq holds a stamped
//! packet until its time; internal pacing holds the next segment in the socket until then. A socket
//! that is not paced stamps each segment with now. Only a segment the host's qdisc took moves the
//! departure time on: a refused one gives its stamp back (`on_local_drop`).

use crate::{Connection, Nanos};

/// `enum sk_pacing`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PacingStatus {
    /// `SK_PACING_NONE`.
    #[default]
    None,
    /// `SK_PACING_NEEDED`: TCP paces itself.
    Needed,
    /// `SK_PACING_FQ`: sch_fq paces the socket.
    Fq,
}

/// `sysctl_tcp_pacing_ss_ratio` and `sysctl_tcp_pacing_ca_ratio`, in percent.
const PACING_SS_RATIO: u64 = 200;
const PACING_CA_RATIO: u64 = 120;
const NSEC_PER_SEC: u64 = 1_000_000_000;

impl Connection {
    /// `sk_pacing_rate` in bytes per second as `tcp_update_pacing_rate` computes it, capped by
    /// `SO_MAX_PACING_RATE`; 0 for no limit (the kernel's `~0UL`: no RTT measured yet, no cap).
    pub fn pacing_rate(&self) -> u64 {
        if self.ca_is_bbr() {
            // BBR sets it (capped by SO_MAX_PACING_RATE already); 0 until it starts.
            return self.sk_pacing_rate;
        }
        let max = self.cfg.max_pacing_rate;
        if self.srtt8 == 0 {
            return max;
        }
        // (`mss * ((USEC_PER_SEC / 100) << 3) * ratio * cwnd / srtt_us`, srtt_us in 1/8 µs.)
        let ratio = if self.cwnd < self.ssthresh / 2 {
            PACING_SS_RATIO
        } else {
            PACING_CA_RATIO
        };
        let srtt8_us = (self.srtt8 / 1000).max(1);
        let rate =
            (self.mss as u64 * 80_000 * ratio * self.cwnd.max(self.packets_out) as u64) / srtt8_us;
        match max {
            0 => rate,
            m => rate.min(m),
        }
    }

    /// `sk_pacing_status`.
    pub fn pacing_status(&self) -> PacingStatus {
        self.pacing_status
    }

    /// A sch_fq with pacing on queued one of this socket's packets (`fq_classify` setting
    /// `SK_PACING_FQ`): from now on fq paces the socket, and TCP stops pacing itself.
    pub fn set_paced_by_fq(&mut self) {
        self.pacing_status = PacingStatus::Fq;
    }

    /// The departure time (`skb->tstamp`, EDT) of the segment `poll_transmit` returned last.
    pub fn departure_time(&self) -> Nanos {
        self.tx_tstamp
    }

    /// `__tcp_transmit_skb`'s stamp: the segment being built leaves no earlier than the socket's
    /// departure time, nor than now.
    pub(crate) fn stamp_departure(&mut self, now: Nanos) {
        self.prior_wstamp = self.wstamp;
        self.wstamp = self.wstamp.max(now);
        self.tx_tstamp = self.wstamp;
    }

    /// `tcp_update_skb_after_send`: a paced socket's next departure moves on by this segment's payload
    /// at the pacing rate (from the tenth data segment), less the credit of a late socket (up to half).
    pub(crate) fn advance_departure(&mut self, payload: u32) {
        if self.pacing_status == PacingStatus::None {
            return;
        }
        let rate = self.pacing_rate();
        if rate == 0 || self.data_segs_out < 10 {
            return;
        }
        let mut len_ns = payload as u64 * NSEC_PER_SEC / rate;
        let credit = self.wstamp - self.prior_wstamp;
        len_ns -= (len_ns / 2).min(credit);
        self.wstamp += len_ns;
    }

    /// Whether the pacing timer (`tcp_pace_kick`'s hrtimer) is due by `now`: a wake-up at `now` is
    /// the pacing timer's (a host that runs it late, the simulator's scheduling delay, asks this).
    pub fn pacing_timer_due(&self, now: Nanos) -> bool {
        self.pacing_at.is_some_and(|t| t <= now)
    }

    /// `tcp_pacing_check`: under internal pacing, data waits for the departure time (the pacing timer is
    /// set for it). True while it must wait.
    #[inline]
    pub(crate) fn pacing_holds(&mut self, now: Nanos) -> bool {
        if self.pacing_status != PacingStatus::Needed || self.wstamp <= now {
            self.pacing_at = None;
            return false;
        }
        self.pacing_at = Some(self.wstamp);
        true
    }
}
