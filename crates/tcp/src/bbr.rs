//! BBR (`net/ipv4/tcp_bbr.c`, Linux 6.12: BBR v1): congestion control from a model of the path — its
//! bottleneck bandwidth (the windowed maximum of the delivery rate samples over 10 round trips) and its
//! round-trip propagation time (the minimum RTT over 10 s) — rather than from losses.
//!
//! BBR sets the pacing rate (pacing gain × bandwidth, 1 % under) and cwnd (cwnd gain × the
//! bandwidth-delay product, plus room for ACK aggregation and for a few full-sized segments) on every
//! ACK (`cong_control`: no slow start, additive increase or PRR of the stack's own), and asks for pacing
//! (`SK_PACING_NEEDED`): sch_fq paces it, or it paces itself. Its modes:
//!
//! - **Startup**: gains 2/ln 2 (2.885), doubling the delivery rate each round; the pipe is full once
//!   three rounds in a row have not raised the bandwidth estimate by 25 %.
//! - **Drain**: pacing gain 1/2.885 until what is in flight is down to one BDP.
//! - **ProbeBW**: an eight-phase pacing gain cycle — 5/4 for a min RTT to probe for more, 3/4 to drain
//!   what that queued, then 1 for six phases — starting at a random phase; cwnd gain 2.
//! - **ProbeRTT**: when the min RTT has not been seen again for 10 s, cwnd drops to 4 packets for 200 ms
//!   and a round, so that the queue drains and the propagation time can be measured again.
//!
//! A long-term estimator watches for token-bucket policers: two consecutive intervals of 4–16 rounds
//! with 20 % loss and bandwidths within 1/8 of each other (or 4 kbit/s) make BBR pace at their average
//! for 48 rounds. In loss recovery BBR conserves packets for the first round (cwnd = what is in flight
//! plus what was ACKed), and restores its cwnd from before the recovery afterwards.
//!
//! What tclab does not do: the random start of the ProbeBW gain cycle (`get_random_u32_below(7)`)
//! draws from a generator seeded by the connection's initial sequence number (itself drawn from the
//! run's seed). The "TSO segments goal" in its cwnd is the kernel's formula,
//! which ignores the device's GSO limit (1 segment below 1.2 Mbit/s, else ~1 ms of data, at least 2); the
//! skbs themselves are sized by `tso.rs` with BBR's `min_tso_segs`.

use crate::rate::RateSample;
use crate::{CaState, Connection, Nanos, PacingStatus};

/// Rates are packets per µs << 24.
const BW_SCALE: u32 = 24;
const BW_UNIT: u64 = 1 << BW_SCALE;
/// Gains are fractions << 8.
const BBR_SCALE: u32 = 8;
const BBR_UNIT: u32 = 1 << BBR_SCALE;
const CYCLE_LEN: u32 = 8;
/// The bandwidth filter's window, in rounds.
const BW_RTTS: u32 = CYCLE_LEN + 2;
/// The min RTT filter's window, in seconds.
const MIN_RTT_WIN_SEC: u32 = 10;
const PROBE_RTT_MODE_MS: u32 = 200;
/// Below this rate (bit/s) a "TSO burst" is one segment.
const MIN_TSO_RATE: u64 = 1_200_000;
const PACING_MARGIN_PERCENT: u64 = 1;
const HIGH_GAIN: u32 = BBR_UNIT * 2885 / 1000 + 1;
const DRAIN_GAIN: u32 = BBR_UNIT * 1000 / 2885;
const CWND_GAIN: u32 = BBR_UNIT * 2;
const PACING_GAIN: [u32; CYCLE_LEN as usize] = [
    BBR_UNIT * 5 / 4,
    BBR_UNIT * 3 / 4,
    BBR_UNIT,
    BBR_UNIT,
    BBR_UNIT,
    BBR_UNIT,
    BBR_UNIT,
    BBR_UNIT,
];
const CYCLE_RAND: u32 = 7;
const CWND_MIN_TARGET: u32 = 4;
const FULL_BW_THRESH: u64 = (BBR_UNIT * 5 / 4) as u64;
const FULL_BW_CNT: u32 = 3;
const LT_INTVL_MIN_RTTS: u32 = 4;
const LT_LOSS_THRESH: u32 = 50;
const LT_BW_RATIO: u32 = BBR_UNIT / 8;
const LT_BW_DIFF: u64 = 4000 / 8;
const LT_BW_MAX_RTTS: u32 = 48;
const EXTRA_ACKED_GAIN: u32 = BBR_UNIT;
const EXTRA_ACKED_WIN_RTTS: u32 = 5;
const ACK_EPOCH_ACKED_RESET_THRESH: u32 = 1 << 20;
const EXTRA_ACKED_MAX_US: u64 = 100 * 1000;
/// `TCP_INIT_CWND`.
const TCP_INIT_CWND: u32 = 10;
/// `GSO_LEGACY_MAX_SIZE - 1 - MAX_TCP_HEADER` (65536 − 1 − 320).
const GSO_BYTES_MAX: u64 = 65536 - 1 - 320;

/// BBR's mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BbrMode {
    Startup,
    Drain,
    ProbeBw,
    ProbeRtt,
}

/// What `bbr_info` reports (`struct tcp_bbr_info`, and more).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BbrInfo {
    pub mode: BbrMode,
    /// The bandwidth estimate, bytes (of payload) per second.
    pub bw: u64,
    /// `u32::MAX` before any sample.
    pub min_rtt_us: u32,
    /// Gains in 1/256.
    pub pacing_gain: u32,
    pub cwnd_gain: u32,
    /// Packet-timed rounds so far.
    pub round: u32,
    /// The round at which startup found the pipe full.
    pub full_bw_reached_at: Option<u32>,
}

/// `struct minmax` (lib/win_minmax.c): the best, second and third best samples of a window.
#[derive(Clone, Copy, Debug, Default)]
struct MinMax {
    s: [(u32, u32); 3],
}

impl MinMax {
    fn get(&self) -> u32 {
        self.s[0].1
    }
    fn reset(&mut self, t: u32, v: u32) -> u32 {
        self.s = [(t, v); 3];
        v
    }
    /// `minmax_running_max`.
    fn running_max(&mut self, win: u32, t: u32, v: u32) -> u32 {
        let val = (t, v);
        if v >= self.s[0].1 || t.wrapping_sub(self.s[2].0) > win {
            return self.reset(t, v);
        }
        if v >= self.s[1].1 {
            self.s[2] = val;
            self.s[1] = val;
        } else if v >= self.s[2].1 {
            self.s[2] = val;
        }
        // minmax_subwin_update
        let dt = t.wrapping_sub(self.s[0].0);
        if dt > win {
            self.s = [self.s[1], self.s[2], val];
            if t.wrapping_sub(self.s[0].0) > win {
                self.s = [self.s[1], self.s[2], val];
            }
        } else if self.s[1].0 == self.s[0].0 && dt > win / 4 {
            self.s[2] = val;
            self.s[1] = val;
        } else if self.s[2].0 == self.s[1].0 && dt > win / 2 {
            self.s[2] = val;
        }
        self.s[0].1
    }
}

/// `struct bbr`.
#[derive(Clone, Debug)]
pub(crate) struct Bbr {
    min_rtt_us: u32,
    /// Jiffies.
    min_rtt_stamp: u32,
    probe_rtt_done_stamp: u32,
    bw: MinMax,
    rtt_cnt: u32,
    next_rtt_delivered: u32,
    /// µs.
    cycle_mstamp: u64,
    mode: BbrMode,
    prev_ca_state: CaState,
    packet_conservation: bool,
    round_start: bool,
    idle_restart: bool,
    probe_rtt_round_done: bool,
    lt_is_sampling: bool,
    lt_rtt_cnt: u32,
    lt_use_bw: bool,
    lt_bw: u32,
    lt_last_delivered: u32,
    /// ms.
    lt_last_stamp: u32,
    lt_last_lost: u32,
    pacing_gain: u32,
    cwnd_gain: u32,
    full_bw_reached: bool,
    full_bw_cnt: u32,
    cycle_idx: u32,
    has_seen_rtt: bool,
    prior_cwnd: u32,
    full_bw: u32,
    /// µs.
    ack_epoch_mstamp: u64,
    extra_acked: [u16; 2],
    ack_epoch_acked: u32,
    extra_acked_win_rtts: u32,
    extra_acked_win_idx: usize,
    /// The generator for the gain cycle's random start (see the essay).
    rng: u64,
    /// The round at which startup found the pipe full (for tests and tools).
    pub(crate) full_bw_at_round: Option<u32>,
}

impl Bbr {
    pub(crate) fn new(seed: u64) -> Bbr {
        Bbr {
            min_rtt_us: u32::MAX,
            min_rtt_stamp: 0,
            probe_rtt_done_stamp: 0,
            bw: MinMax::default(),
            rtt_cnt: 0,
            next_rtt_delivered: 0,
            cycle_mstamp: 0,
            mode: BbrMode::Startup,
            prev_ca_state: CaState::Open,
            packet_conservation: false,
            round_start: false,
            idle_restart: false,
            probe_rtt_round_done: false,
            lt_is_sampling: false,
            lt_rtt_cnt: 0,
            lt_use_bw: false,
            lt_bw: 0,
            lt_last_delivered: 0,
            lt_last_stamp: 0,
            lt_last_lost: 0,
            pacing_gain: HIGH_GAIN,
            cwnd_gain: HIGH_GAIN,
            full_bw_reached: false,
            full_bw_cnt: 0,
            cycle_idx: 0,
            has_seen_rtt: false,
            prior_cwnd: 0,
            full_bw: 0,
            ack_epoch_mstamp: 0,
            extra_acked: [0; 2],
            ack_epoch_acked: 0,
            extra_acked_win_rtts: 0,
            extra_acked_win_idx: 0,
            rng: seed ^ 0xbb5e_ed00_0000_0000,
            full_bw_at_round: None,
        }
    }

    fn max_bw(&self) -> u32 {
        self.bw.get()
    }

    /// `bbr_bw`: the long-term (policed) rate while it is used, else the max filter's.
    fn bw(&self) -> u32 {
        if self.lt_use_bw {
            self.lt_bw
        } else {
            self.max_bw()
        }
    }

    fn extra_acked(&self) -> u32 {
        self.extra_acked[0].max(self.extra_acked[1]) as u32
    }

    /// `get_random_u32_below(n)` from the connection's own generator.
    fn random_below(&mut self, n: u32) -> u32 {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (((z >> 32) * n as u64) >> 32) as u32
    }
}

/// A snapshot of what BBR reads of the connection.
struct Sock {
    mss: u32,
    max_pacing_rate: u64,
}

impl Sock {
    /// `bbr_rate_bytes_per_sec`: a rate (packets/µs << 24) with a gain, in bytes per second, 1 % under.
    fn rate_bytes_per_sec(&self, rate: u64, gain: u32) -> u64 {
        let mut r = rate * self.mss as u64;
        r *= gain as u64;
        r >>= BBR_SCALE;
        r *= 1_000_000 / 100 * (100 - PACING_MARGIN_PERCENT);
        r >> BW_SCALE
    }
    /// `bbr_bw_to_pacing_rate`.
    fn pacing_rate(&self, bw: u32, gain: u32) -> u64 {
        let r = self.rate_bytes_per_sec(bw as u64, gain);
        match self.max_pacing_rate {
            0 => r,
            m => r.min(m),
        }
    }
}

fn jiffies32(now: Nanos) -> u32 {
    crate::cong::jiffies(now) as u32
}

/// `after(a, b)` on 32-bit sequence-like counters.
fn after(a: u32, b: u32) -> bool {
    (b.wrapping_sub(a) as i32) < 0
}

impl Connection {
    fn bbr_sock(&self) -> Sock {
        Sock {
            mss: self.mss,
            max_pacing_rate: self.cfg.max_pacing_rate,
        }
    }

    /// Run `f` on the connection's BBR state (taken out for the call, so `f` may use the connection).
    fn with_bbr<R>(&mut self, f: impl FnOnce(&mut Bbr, &mut Connection) -> R) -> Option<R> {
        use crate::cong::Ca;
        if !matches!(self.ca, Ca::Bbr(_)) {
            return None;
        }
        let Ca::Bbr(mut b) = std::mem::replace(&mut self.ca, Ca::Reno(crate::reno::Reno)) else {
            unreachable!("checked above")
        };
        let r = f(&mut b, self);
        self.ca = crate::cong::Ca::Bbr(b);
        Some(r)
    }

    /// BBR's state (`bbr_get_info`, and its round count), for tests and statistics.
    pub fn bbr_info(&self) -> Option<BbrInfo> {
        let crate::cong::Ca::Bbr(b) = &self.ca else {
            return None;
        };
        Some(BbrInfo {
            mode: b.mode,
            bw: (b.bw() as u64 * self.mss as u64 * 1_000_000) >> BW_SCALE,
            min_rtt_us: b.min_rtt_us,
            pacing_gain: b.pacing_gain,
            cwnd_gain: b.cwnd_gain,
            round: b.rtt_cnt,
            full_bw_reached_at: b.full_bw_at_round,
        })
    }

    /// `bbr_init`, at the start of data transfer.
    pub(crate) fn bbr_init(&mut self, now: Nanos) {
        let delivered = self.delivered;
        let min_rtt_us = match self.min_rtt {
            0 => u32::MAX,
            m => (m / 1000) as u32,
        };
        self.with_bbr(|b, c| {
            b.prior_cwnd = 0;
            c.ssthresh = crate::TCP_INFINITE_SSTHRESH;
            b.rtt_cnt = 0;
            b.next_rtt_delivered = delivered;
            b.prev_ca_state = CaState::Open;
            b.packet_conservation = false;
            b.probe_rtt_done_stamp = 0;
            b.probe_rtt_round_done = false;
            b.min_rtt_us = min_rtt_us;
            b.min_rtt_stamp = jiffies32(now);
            b.bw.reset(b.rtt_cnt, 0);
            b.has_seen_rtt = false;
            c.bbr_init_pacing_rate_from_rtt(b);
            b.round_start = false;
            b.idle_restart = false;
            b.full_bw_reached = false;
            b.full_bw = 0;
            b.full_bw_cnt = 0;
            b.cycle_mstamp = 0;
            b.cycle_idx = 0;
            c.bbr_reset_lt_bw_sampling(b);
            b.mode = BbrMode::Startup;
            b.ack_epoch_mstamp = crate::rate::us(now);
            b.ack_epoch_acked = 0;
            b.extra_acked_win_rtts = 0;
            b.extra_acked_win_idx = 0;
            b.extra_acked = [0; 2];
        });
        if self.pacing_status == PacingStatus::None {
            self.pacing_status = PacingStatus::Needed;
        }
    }

    /// `bbr_init_pacing_rate_from_rtt`: high gain × cwnd / srtt (1 ms without a sample).
    fn bbr_init_pacing_rate_from_rtt(&mut self, b: &mut Bbr) {
        let rtt_us = if self.srtt8 != 0 {
            b.has_seen_rtt = true;
            ((self.srtt8 / 1000) >> 3).max(1)
        } else {
            1000
        };
        let bw = self.cwnd as u64 * BW_UNIT / rtt_us;
        self.sk_pacing_rate = self.bbr_sock().pacing_rate(bw as u32, HIGH_GAIN);
    }

    /// `bbr_set_pacing_rate`: only raised until the pipe is full.
    fn bbr_set_pacing_rate(&mut self, b: &mut Bbr, bw: u32, gain: u32) {
        let rate = self.bbr_sock().pacing_rate(bw, gain);
        if !b.has_seen_rtt && self.srtt8 != 0 {
            self.bbr_init_pacing_rate_from_rtt(b);
        }
        if b.full_bw_reached || rate > self.sk_pacing_rate {
            self.sk_pacing_rate = rate;
        }
    }

    /// `bbr_min_tso_segs`: one segment per skb below 1.2 Mbit/s, else two (BBR's `min_tso_segs`,
    /// which `tcp_tso_segs` reads too).
    pub(crate) fn bbr_min_tso_segs(&self) -> u32 {
        if self.sk_pacing_rate < MIN_TSO_RATE >> 3 {
            1
        } else {
            2
        }
    }

    /// `bbr_tso_segs_goal`: about a millisecond of data at the pacing rate, in segments (no GSO limit
    /// but the legacy 64 KB), at least `bbr_min_tso_segs`.
    fn bbr_tso_segs_goal(&self) -> u32 {
        let min_segs = self.bbr_min_tso_segs();
        let bytes = (self.sk_pacing_rate >> 10).min(GSO_BYTES_MAX);
        let segs = ((bytes / self.mss as u64) as u32).max(min_segs);
        segs.min(0x7f)
    }

    /// `bbr_save_cwnd`.
    fn bbr_save_cwnd(&self, b: &mut Bbr) {
        if b.prev_ca_state < CaState::Recovery && b.mode != BbrMode::ProbeRtt {
            b.prior_cwnd = self.cwnd;
        } else {
            b.prior_cwnd = b.prior_cwnd.max(self.cwnd);
        }
    }

    /// `bbr_cwnd_event(CA_EVENT_TX_START)`: sending again after idle, application-limited.
    pub(crate) fn bbr_tx_start(&mut self, now: Nanos) {
        if self.app_limited == 0 {
            return;
        }
        self.with_bbr(|b, c| {
            b.idle_restart = true;
            b.ack_epoch_mstamp = crate::rate::us(now);
            b.ack_epoch_acked = 0;
            if b.mode == BbrMode::ProbeBw {
                let bw = b.bw();
                c.bbr_set_pacing_rate(b, bw, BBR_UNIT);
            } else if b.mode == BbrMode::ProbeRtt {
                c.bbr_check_probe_rtt_done(b, now);
            }
        });
    }

    /// `bbr_bdp`: gain × bandwidth × min RTT, in packets, rounded up.
    fn bbr_bdp(b: &Bbr, bw: u32, gain: u32) -> u32 {
        if b.min_rtt_us == u32::MAX {
            return TCP_INIT_CWND;
        }
        let w = bw as u64 * b.min_rtt_us as u64;
        ((w * gain as u64) >> BBR_SCALE).div_ceil(BW_UNIT) as u32
    }

    /// `bbr_quantization_budget`.
    fn bbr_quantization_budget(&self, b: &Bbr, cwnd: u32) -> u32 {
        let mut cwnd = cwnd + 3 * self.bbr_tso_segs_goal();
        cwnd = (cwnd + 1) & !1;
        if b.mode == BbrMode::ProbeBw && b.cycle_idx == 0 {
            cwnd += 2;
        }
        cwnd
    }

    /// `bbr_inflight`.
    fn bbr_inflight(&self, b: &Bbr, bw: u32, gain: u32) -> u32 {
        let bdp = Self::bbr_bdp(b, bw, gain);
        self.bbr_quantization_budget(b, bdp)
    }

    /// `bbr_packets_in_net_at_edt`: what will still be in flight at the next departure time.
    fn bbr_packets_in_net_at_edt(&self, b: &Bbr, inflight_now: u32, now: Nanos) -> u32 {
        let edt = self.wstamp.max(now);
        let interval_us = (edt - now) / 1000;
        let interval_delivered = ((b.bw() as u64 * interval_us) >> BW_SCALE) as u32;
        let mut at_edt = inflight_now;
        if b.pacing_gain > BBR_UNIT {
            at_edt += self.bbr_tso_segs_goal();
        }
        at_edt.saturating_sub(interval_delivered)
    }

    /// `bbr_ack_aggregation_cwnd`.
    fn bbr_ack_aggregation_cwnd(b: &Bbr) -> u32 {
        if !b.full_bw_reached {
            return 0;
        }
        let max_aggr = (b.bw() as u64 * EXTRA_ACKED_MAX_US / BW_UNIT) as u32;
        let aggr = (EXTRA_ACKED_GAIN * b.extra_acked()) >> BBR_SCALE;
        aggr.min(max_aggr)
    }

    /// `bbr_set_cwnd_to_recover_or_restore`: packet conservation in the first round of recovery, the
    /// saved cwnd back after it. The cwnd, and whether packets are being conserved.
    fn bbr_recover_or_restore(&self, b: &mut Bbr, rs: &RateSample, acked: u32) -> (u32, bool) {
        let state = self.ca_state;
        let mut cwnd = self.cwnd;
        if rs.losses > 0 {
            cwnd = (cwnd as i64 - rs.losses as i64).max(1) as u32;
        }
        if state == CaState::Recovery && b.prev_ca_state != CaState::Recovery {
            b.packet_conservation = true;
            b.next_rtt_delivered = self.delivered;
            cwnd = self.in_flight() + acked;
        } else if b.prev_ca_state >= CaState::Recovery && state < CaState::Recovery {
            cwnd = cwnd.max(b.prior_cwnd);
            b.packet_conservation = false;
        }
        b.prev_ca_state = state;
        if b.packet_conservation {
            return (cwnd.max(self.in_flight() + acked), true);
        }
        (cwnd, false)
    }

    /// `bbr_set_cwnd`.
    fn bbr_set_cwnd(&mut self, b: &mut Bbr, rs: &RateSample, acked: u32, bw: u32, gain: u32) {
        let mut cwnd = self.cwnd;
        if acked != 0 {
            let (c, conserving) = self.bbr_recover_or_restore(b, rs, acked);
            cwnd = c;
            if !conserving {
                let mut target = Self::bbr_bdp(b, bw, gain);
                target += Self::bbr_ack_aggregation_cwnd(b);
                target = self.bbr_quantization_budget(b, target);
                if b.full_bw_reached {
                    cwnd = (cwnd + acked).min(target);
                } else if cwnd < target || self.delivered < TCP_INIT_CWND {
                    cwnd += acked;
                }
                cwnd = cwnd.max(CWND_MIN_TARGET);
            }
        }
        self.cwnd = cwnd;
        if b.mode == BbrMode::ProbeRtt {
            self.cwnd = self.cwnd.min(CWND_MIN_TARGET);
        }
    }

    /// `bbr_is_next_cycle_phase`.
    fn bbr_is_next_cycle_phase(&self, b: &Bbr, rs: &RateSample, now: Nanos) -> bool {
        let is_full_length =
            self.delivered_mstamp.saturating_sub(b.cycle_mstamp) > b.min_rtt_us as u64;
        if b.pacing_gain == BBR_UNIT {
            return is_full_length;
        }
        let inflight = self.bbr_packets_in_net_at_edt(b, rs.prior_in_flight, now);
        let bw = b.max_bw();
        if b.pacing_gain > BBR_UNIT {
            return is_full_length
                && (rs.losses > 0 || inflight >= self.bbr_inflight(b, bw, b.pacing_gain));
        }
        is_full_length || inflight <= self.bbr_inflight(b, bw, BBR_UNIT)
    }

    fn bbr_advance_cycle_phase(&self, b: &mut Bbr) {
        b.cycle_idx = (b.cycle_idx + 1) & (CYCLE_LEN - 1);
        b.cycle_mstamp = self.delivered_mstamp;
    }

    /// `bbr_reset_probe_bw_mode`: gain cycling from a random phase (not the 3/4 one).
    fn bbr_reset_probe_bw_mode(&self, b: &mut Bbr) {
        b.mode = BbrMode::ProbeBw;
        b.cycle_idx = CYCLE_LEN - 1 - b.random_below(CYCLE_RAND);
        self.bbr_advance_cycle_phase(b);
    }

    fn bbr_reset_mode(&self, b: &mut Bbr) {
        if !b.full_bw_reached {
            b.mode = BbrMode::Startup;
        } else {
            self.bbr_reset_probe_bw_mode(b);
        }
    }

    fn bbr_reset_lt_bw_sampling_interval(&self, b: &mut Bbr) {
        b.lt_last_stamp = (self.delivered_mstamp / 1000) as u32;
        b.lt_last_delivered = self.delivered;
        b.lt_last_lost = self.lost_total;
        b.lt_rtt_cnt = 0;
    }

    fn bbr_reset_lt_bw_sampling(&self, b: &mut Bbr) {
        b.lt_bw = 0;
        b.lt_use_bw = false;
        b.lt_is_sampling = false;
        self.bbr_reset_lt_bw_sampling_interval(b);
    }

    /// `bbr_lt_bw_interval_done`: two consistent lossy intervals mean a policer.
    fn bbr_lt_bw_interval_done(&self, b: &mut Bbr, bw: u32) {
        if b.lt_bw != 0 {
            let diff = bw.abs_diff(b.lt_bw);
            if diff as u64 * BBR_UNIT as u64 <= LT_BW_RATIO as u64 * b.lt_bw as u64
                || self.bbr_sock().rate_bytes_per_sec(diff as u64, BBR_UNIT) <= LT_BW_DIFF
            {
                b.lt_bw = (bw + b.lt_bw) >> 1;
                b.lt_use_bw = true;
                b.pacing_gain = BBR_UNIT;
                b.lt_rtt_cnt = 0;
                return;
            }
        }
        b.lt_bw = bw;
        self.bbr_reset_lt_bw_sampling_interval(b);
    }

    /// `bbr_lt_bw_sampling`: the long-term (policer) estimator.
    fn bbr_lt_bw_sampling(&self, b: &mut Bbr, rs: &RateSample) {
        if b.lt_use_bw {
            if b.mode == BbrMode::ProbeBw && b.round_start {
                b.lt_rtt_cnt += 1;
                if b.lt_rtt_cnt >= LT_BW_MAX_RTTS {
                    self.bbr_reset_lt_bw_sampling(b);
                    self.bbr_reset_probe_bw_mode(b);
                }
            }
            return;
        }
        if !b.lt_is_sampling {
            if rs.losses == 0 {
                return;
            }
            self.bbr_reset_lt_bw_sampling_interval(b);
            b.lt_is_sampling = true;
        }
        if rs.is_app_limited {
            self.bbr_reset_lt_bw_sampling(b);
            return;
        }
        if b.round_start {
            b.lt_rtt_cnt += 1;
        }
        if b.lt_rtt_cnt < LT_INTVL_MIN_RTTS {
            return;
        }
        if b.lt_rtt_cnt > 4 * LT_INTVL_MIN_RTTS {
            self.bbr_reset_lt_bw_sampling(b);
            return;
        }
        if rs.losses == 0 {
            return;
        }
        let lost = self.lost_total.wrapping_sub(b.lt_last_lost);
        let delivered = self.delivered.wrapping_sub(b.lt_last_delivered);
        if delivered == 0 || (lost << BBR_SCALE) < LT_LOSS_THRESH * delivered {
            return;
        }
        let t = ((self.delivered_mstamp / 1000) as u32).wrapping_sub(b.lt_last_stamp);
        if (t as i32) < 1 {
            return;
        }
        if t >= u32::MAX / 1000 {
            self.bbr_reset_lt_bw_sampling(b);
            return;
        }
        let bw = delivered as u64 * BW_UNIT / (t as u64 * 1000);
        self.bbr_lt_bw_interval_done(b, bw as u32);
    }

    /// `bbr_update_bw`: rounds, and the max filter.
    fn bbr_update_bw(&self, b: &mut Bbr, rs: &RateSample) {
        b.round_start = false;
        if rs.delivered < 0 || rs.interval_us <= 0 {
            return;
        }
        if !after(b.next_rtt_delivered, rs.prior_delivered) {
            b.next_rtt_delivered = self.delivered;
            b.rtt_cnt = b.rtt_cnt.wrapping_add(1);
            b.round_start = true;
            b.packet_conservation = false;
        }
        self.bbr_lt_bw_sampling(b, rs);
        let bw = (rs.delivered as u64 * BW_UNIT / rs.interval_us as u64) as u32;
        if !rs.is_app_limited || bw >= b.max_bw() {
            b.bw.running_max(BW_RTTS, b.rtt_cnt, bw);
        }
    }

    /// `bbr_update_ack_aggregation`.
    fn bbr_update_ack_aggregation(&self, b: &mut Bbr, rs: &RateSample) {
        if rs.acked_sacked == 0 || rs.delivered < 0 || rs.interval_us <= 0 {
            return;
        }
        if b.round_start {
            b.extra_acked_win_rtts = (b.extra_acked_win_rtts + 1).min(0x1f);
            if b.extra_acked_win_rtts >= EXTRA_ACKED_WIN_RTTS {
                b.extra_acked_win_rtts = 0;
                b.extra_acked_win_idx = 1 - b.extra_acked_win_idx;
                b.extra_acked[b.extra_acked_win_idx] = 0;
            }
        }
        let epoch_us = self.delivered_mstamp.saturating_sub(b.ack_epoch_mstamp);
        let mut expected = (b.bw() as u64 * epoch_us / BW_UNIT) as u32;
        if b.ack_epoch_acked <= expected
            || b.ack_epoch_acked + rs.acked_sacked >= ACK_EPOCH_ACKED_RESET_THRESH
        {
            b.ack_epoch_acked = 0;
            b.ack_epoch_mstamp = self.delivered_mstamp;
            expected = 0;
        }
        b.ack_epoch_acked = (b.ack_epoch_acked + rs.acked_sacked).min(0xfffff);
        let extra = (b.ack_epoch_acked - expected).min(self.cwnd);
        if extra > b.extra_acked[b.extra_acked_win_idx] as u32 {
            b.extra_acked[b.extra_acked_win_idx] = extra as u16;
        }
    }

    /// `bbr_check_full_bw_reached`: three rounds without 25 % growth.
    fn bbr_check_full_bw_reached(b: &mut Bbr, rs: &RateSample) {
        if b.full_bw_reached || !b.round_start || rs.is_app_limited {
            return;
        }
        let thresh = (b.full_bw as u64 * FULL_BW_THRESH) >> BBR_SCALE;
        if b.max_bw() as u64 >= thresh {
            b.full_bw = b.max_bw();
            b.full_bw_cnt = 0;
            return;
        }
        b.full_bw_cnt += 1;
        b.full_bw_reached = b.full_bw_cnt >= FULL_BW_CNT;
        if b.full_bw_reached {
            b.full_bw_at_round = Some(b.rtt_cnt);
        }
    }

    /// `bbr_check_drain`.
    fn bbr_check_drain(&mut self, b: &mut Bbr, now: Nanos) {
        if b.mode == BbrMode::Startup && b.full_bw_reached {
            b.mode = BbrMode::Drain;
            self.ssthresh = self.bbr_inflight(b, b.max_bw(), BBR_UNIT);
        }
        if b.mode == BbrMode::Drain
            && self.bbr_packets_in_net_at_edt(b, self.in_flight(), now)
                <= self.bbr_inflight(b, b.max_bw(), BBR_UNIT)
        {
            self.bbr_reset_probe_bw_mode(b);
        }
    }

    /// `bbr_check_probe_rtt_done`.
    fn bbr_check_probe_rtt_done(&mut self, b: &mut Bbr, now: Nanos) {
        let j = jiffies32(now);
        if !(b.probe_rtt_done_stamp != 0 && after(j, b.probe_rtt_done_stamp)) {
            return;
        }
        b.min_rtt_stamp = j;
        self.cwnd = self.cwnd.max(b.prior_cwnd);
        self.bbr_reset_mode(b);
    }

    /// `bbr_update_min_rtt`: the 10 s min RTT filter, and ProbeRTT.
    fn bbr_update_min_rtt(&mut self, b: &mut Bbr, rs: &RateSample, now: Nanos) {
        let j = jiffies32(now);
        let filter_expired = after(
            j,
            b.min_rtt_stamp
                .wrapping_add(MIN_RTT_WIN_SEC * crate::cong::HZ as u32),
        );
        if rs.rtt_us >= 0
            && ((rs.rtt_us as u64) < b.min_rtt_us as u64 || (filter_expired && !rs.is_ack_delayed))
        {
            b.min_rtt_us = rs.rtt_us as u32;
            b.min_rtt_stamp = j;
        }
        if filter_expired && !b.idle_restart && b.mode != BbrMode::ProbeRtt {
            b.mode = BbrMode::ProbeRtt;
            self.bbr_save_cwnd(b);
            b.probe_rtt_done_stamp = 0;
        }
        if b.mode == BbrMode::ProbeRtt {
            // Low-rate samples of this mode are not bandwidth estimates.
            let v = self.delivered.wrapping_add(self.in_flight());
            self.app_limited = if v == 0 { 1 } else { v };
            if b.probe_rtt_done_stamp == 0 && self.in_flight() <= CWND_MIN_TARGET {
                b.probe_rtt_done_stamp = j.wrapping_add(PROBE_RTT_MODE_MS);
                b.probe_rtt_round_done = false;
                b.next_rtt_delivered = self.delivered;
            } else if b.probe_rtt_done_stamp != 0 {
                if b.round_start {
                    b.probe_rtt_round_done = true;
                }
                if b.probe_rtt_round_done {
                    self.bbr_check_probe_rtt_done(b, now);
                }
            }
        }
        if rs.delivered > 0 {
            b.idle_restart = false;
        }
    }

    fn bbr_update_gains(b: &mut Bbr) {
        let (p, c) = match b.mode {
            BbrMode::Startup => (HIGH_GAIN, HIGH_GAIN),
            BbrMode::Drain => (DRAIN_GAIN, HIGH_GAIN),
            BbrMode::ProbeBw => (
                if b.lt_use_bw {
                    BBR_UNIT
                } else {
                    PACING_GAIN[b.cycle_idx as usize]
                },
                CWND_GAIN,
            ),
            BbrMode::ProbeRtt => (BBR_UNIT, BBR_UNIT),
        };
        b.pacing_gain = p;
        b.cwnd_gain = c;
    }

    /// `bbr_main` (`cong_control`), on every ACK with its rate sample.
    pub(crate) fn bbr_main(&mut self, now: Nanos) {
        let rs = self.rs;
        self.with_bbr(|b, c| {
            c.bbr_update_bw(b, &rs);
            c.bbr_update_ack_aggregation(b, &rs);
            if b.mode == BbrMode::ProbeBw && c.bbr_is_next_cycle_phase(b, &rs, now) {
                c.bbr_advance_cycle_phase(b);
            }
            Self::bbr_check_full_bw_reached(b, &rs);
            c.bbr_check_drain(b, now);
            c.bbr_update_min_rtt(b, &rs, now);
            Self::bbr_update_gains(b);
            let bw = b.bw();
            let gain = b.pacing_gain;
            c.bbr_set_pacing_rate(b, bw, gain);
            let cwnd_gain = b.cwnd_gain;
            c.bbr_set_cwnd(b, &rs, rs.acked_sacked, bw, cwnd_gain);
        });
    }

    /// `bbr_ssthresh`: entering recovery or loss, remember the cwnd; ssthresh stays.
    pub(crate) fn bbr_ssthresh(&mut self) -> Option<u32> {
        self.with_bbr(|b, c| {
            c.bbr_save_cwnd(b);
            c.ssthresh
        })
    }

    /// `bbr_set_state(TCP_CA_Loss)`: an RTO ends a round and the full-pipe estimate.
    pub(crate) fn bbr_on_loss(&mut self) {
        self.with_bbr(|b, c| {
            let rs = RateSample {
                losses: 1,
                ..RateSample::default()
            };
            b.prev_ca_state = CaState::Loss;
            b.full_bw = 0;
            b.round_start = true;
            c.bbr_lt_bw_sampling(b, &rs);
        });
    }

    /// `bbr_undo_cwnd`: a reduction undone; the full-pipe estimate and the policer's sampling start
    /// over, cwnd stays. False when BBR is not the module.
    pub(crate) fn bbr_undo_cwnd(&mut self) -> bool {
        self.with_bbr(|b, c| {
            b.full_bw = 0;
            b.full_bw_cnt = 0;
            c.bbr_reset_lt_bw_sampling(b);
        })
        .is_some()
    }

    /// Is BBR the congestion control (`icsk_ca_ops->cong_control`)?
    pub(crate) fn ca_is_bbr(&self) -> bool {
        matches!(self.ca, crate::cong::Ca::Bbr(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_windowed_max_forgets_after_its_window() {
        let mut m = MinMax::default();
        m.reset(0, 0);
        assert_eq!(m.running_max(10, 1, 100), 100);
        assert_eq!(m.running_max(10, 2, 50), 100);
        assert_eq!(m.running_max(10, 5, 70), 100);
        // Round 12: the max (round 1) is 11 rounds old; the best left in the window is 70 (round 5).
        assert_eq!(m.running_max(10, 12, 60), 70);
        assert_eq!(m.running_max(10, 40, 10), 10, "nothing left in the window");
    }

    #[test]
    fn gains_are_the_kernels() {
        assert_eq!(HIGH_GAIN, 739);
        assert_eq!(DRAIN_GAIN, 88);
        assert_eq!(PACING_GAIN[0], 320);
        assert_eq!(PACING_GAIN[1], 192);
    }
}
