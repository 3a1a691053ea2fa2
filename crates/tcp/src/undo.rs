//! D-SACK (RFC 2883) and the undo of spurious window reductions, as Linux 6.12 does them
//! (`tcp_input.c`, `tcp_output.c`, `tcp_recovery.c`).
//!
//! **The receiver** reports a segment it already had in the first SACK block of its next ACK
//! (`tcp_dsack_set`): a duplicate below `rcv_nxt` (`TCPDSACKOldSent`) or one the out-of-order queue
//! already holds (`TCPDSACKOfoSent`); the block goes out once (`tcp_options_write` clears it).
//!
//! **The sender** reads a first block below the ACK, or inside the second block, as a D-SACK
//! (`tcp_check_dsack`: `TCPDSACKRecv`, `TCPDSACKOfoRecv`), unless it is dubious: larger than the
//! largest window, or more duplicates reported than segments ever retransmitted (`tcp_dsack_seen`).
//! Each recovery or loss episode keeps `undo_marker` (snd_una when it began), the ssthresh before the
//! cut (`prior_ssthresh`), the send time of its first retransmission (`retrans_stamp`) and
//! `undo_retrans`, the retransmissions that no D-SACK has yet shown needless. The cut is undone —
//! cwnd and ssthresh back (`tcp_undo_cwnd_reduction`) — when every retransmission was D-SACKed
//! (`tcp_try_undo_dsack`: `TCPDSACKUndo`), or when an ACK echoes a timestamp older than the first
//! retransmission, so that the original had arrived (`tcp_packet_delayed`, Eifel): at the end of
//! recovery (`tcp_try_undo_recovery`: `TCPFullUndo`, or `TCPLossUndo` from Loss), on a partial ACK
//! (`tcp_try_undo_partial`: `TCPPartialUndo`) and on any ACK advancing snd_una in Loss
//! (`tcp_try_undo_loss`). A D-SACK seen after reordering widens RACK's reordering window by a
//! quarter of the min RTT per round that had one (`tcp_rack_update_reo_wnd`, up to srtt), kept for
//! 16 recoveries after (`reo_wnd_persist`); each undone episode also keeps it.
//!
//! **F-RTO** (RFC 5682 with SACK, Linux's `tcp_frto = 2`; `tcp_process_loss`): after a timeout that
//! starts a loss episode (or repeats one), the first ACK that advances snd_una without ending the
//! episode sends new data instead of more retransmissions (`REXMIT_NEW`); if the next ACKs then
//! acknowledge or SACK data that was never retransmitted, the timeout was spurious and is undone
//! (`TCPSpuriousRTOs` and `TCPLossUndo`); a SACK or duplicate ACK instead shows the loss real, and
//! the retransmissions go on.
//!
//! Not modelled: a D-SACK's segments counted delivered (`sack_delivered`, for PRR and the rate
//! sample), SACK reneging, and the counters of ignored D-SACKs (`TCPDSACKIgnored*`).

use crate::{CaState, Connection};

/// `TCP_RACK_RECOVERY_THRESH`: recoveries a widened reordering window outlives.
pub(crate) const TCP_RACK_RECOVERY_THRESH: u8 = 16;
/// `net.ipv4.tcp_max_reordering`.
pub(crate) const TCP_MAX_REORDERING: u32 = 300;

/// The undo state of `tcp_sock`, and the receiver's pending D-SACK.
#[derive(Clone, Debug, Default)]
pub(crate) struct Undo {
    /// snd_una when the episode began (`undo_marker`); 0: nothing to undo.
    marker: u64,
    /// The episode's retransmissions not yet D-SACKed (`undo_retrans`); -1: none sent yet.
    retrans: i32,
    /// ssthresh before the cut (`prior_ssthresh`); 0: the cut stands (an ECN echo asked for it).
    prior_ssthresh: u32,
    /// Timestamp value of the episode's first retransmission (`retrans_stamp`); 0: none.
    retrans_stamp: u32,
    /// Segments reported by D-SACKs so far (`dsack_dups`).
    dsack_dups: u64,
    /// The timestamp echo of the ACK being processed (`rx_opt.rcv_tsecr`); 0: none.
    pub(crate) rcv_tsecr: u32,
    /// Receiver: the D-SACK block the next ACK carries first (`rx_opt.dsack`, `duplicate_sack[0]`).
    pub(crate) dsack_block: Option<(u64, u64)>,
    /// F-RTO runs in this loss episode (`tp->frto`).
    pub(crate) frto: bool,
    /// This ACK sends new data before any retransmission (`REXMIT_NEW`).
    pub(crate) rexmit_new: bool,
    /// No retransmission until the next ACK (`tcp_xmit_recovery` without `REXMIT_LOST`): F-RTO's new
    /// data went past high_seq, or a partial ACK showed the original delivered while retransmissions
    /// are out (`tcp_try_undo_partial`). Not modelled: Linux's TSQ and pacing handlers
    /// (`tcp_tsq_write`) retransmit lost segments whatever an ACK held back.
    pub(crate) hold_rexmit: bool,
}

/// What an ACK did, as `tcp_fastretrans_alert` reads its flags.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct AckFlags {
    /// `FLAG_ECE`.
    pub(crate) ece: bool,
    /// `FLAG_DATA_SACKED`: it SACKed new data.
    pub(crate) data_sacked: bool,
    /// A duplicate ACK (`num_dupack`).
    pub(crate) dup: bool,
    /// `FLAG_ORIG_SACK_ACKED`: it acknowledged or SACKed data never retransmitted.
    pub(crate) orig_sack_acked: bool,
}

/// The D-SACK and undo counters, as `nstat` names Linux's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UndoStats {
    /// D-SACKs received for data below the ACK (`TCPDSACKRecv`).
    pub dsack_recv: u64,
    /// D-SACKs received for data above it (`TCPDSACKOfoRecv`).
    pub dsack_ofo_recv: u64,
    /// D-SACKs sent for duplicates below `rcv_nxt` (`TCPDSACKOldSent`).
    pub dsack_old_sent: u64,
    /// D-SACKs sent for duplicates of out-of-order data (`TCPDSACKOfoSent`).
    pub dsack_ofo_sent: u64,
    /// Recoveries undone at their end (`TCPFullUndo`).
    pub full_undo: u64,
    /// Recoveries undone on a partial ACK (`TCPPartialUndo`).
    pub partial_undo: u64,
    /// Reductions undone because every retransmission was D-SACKed (`TCPDSACKUndo`).
    pub dsack_undo: u64,
    /// Loss (RTO) episodes undone (`TCPLossUndo`).
    pub loss_undo: u64,
    /// Timeouts F-RTO found spurious (`TCPSpuriousRTOs`).
    pub spurious_rtos: u64,
}

/// What `check_dsack` found in an ACK's first block.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Dsack {
    /// A D-SACK that counts (`FLAG_DSACKING_ACK`).
    pub(crate) seen: bool,
    /// It reports the loss probe (`FLAG_DSACK_TLP`).
    pub(crate) tlp: bool,
}

impl Connection {
    // ---- the receiver ----

    /// `tcp_dsack_set()`: report `[s, e)`, a duplicate, first in the next ACK's SACK blocks.
    pub(crate) fn dsack_set(&mut self, s: u64, e: u64) {
        if !self.sack_ok || s >= e {
            return;
        }
        if s < self.rcv_nxt {
            self.undo_stats.dsack_old_sent += 1;
        } else {
            self.undo_stats.dsack_ofo_sent += 1;
        }
        self.undo.dsack_block = Some((s, e));
    }

    /// `tcp_data_queue_ofo`'s duplicate check: the part of `[s, e)` the out-of-order queue already
    /// holds, reported as a D-SACK (`tcp_dsack_set` for the first overlap).
    pub(crate) fn dsack_ofo(&mut self, s: u64, e: u64) {
        let dup = self
            .ooo
            .iter()
            .find(|&&(a, b)| a < e && s < b)
            .map(|&(a, b)| (s.max(a), e.min(b)));
        if let Some((a, b)) = dup {
            self.dsack_set(a, b);
        }
    }

    // ---- the sender ----

    /// `tcp_check_dsack()` + `tcp_dsack_seen()`: is the first SACK block a D-SACK (below the ACK, or
    /// inside the second block)? `blocks`: the ACK's blocks, absolute; `prior_snd_una`: before it.
    pub(crate) fn check_dsack(
        &mut self,
        blocks: &[(u64, u64)],
        ack: u64,
        prior_snd_una: u64,
    ) -> Dsack {
        let mut d = Dsack::default();
        let Some(&(s, e)) = blocks.first() else {
            return d;
        };
        let ofo = if s < ack {
            false
        } else if let Some(&(s1, e1)) = blocks.get(1) {
            if e > e1 || s < s1 {
                return d;
            }
            true
        } else {
            return d;
        };
        if ofo {
            self.undo_stats.dsack_ofo_recv += 1;
        } else {
            self.undo_stats.dsack_recv += 1;
        }
        // tcp_dsack_seen(): dubious if empty or wider than any window; one duplicate per MSS.
        if s >= e || e - s > self.max_window {
            return d;
        }
        let len = e - s;
        let mss = self.mss.max(1) as u64;
        let dups = if len > mss { len.div_ceil(mss) } else { 1 };
        if dups == 1 && self.tlp_high_seq != 0 && self.tlp_high_seq == e {
            d.tlp = true;
        }
        self.undo.dsack_dups += dups;
        // More duplicates than retransmissions: not our doing (a duplicating network).
        if self.undo.dsack_dups > self.retransmits {
            return d;
        }
        // RACK widens its window on D-SACKs after reordering, but not for a probe's (timer-driven).
        if self.reord_seen > 0 && !d.tlp {
            self.rack.dsack_seen = true;
        }
        d.seen = true;
        if self.undo.marker != 0 && self.undo.retrans > 0 {
            if e <= prior_snd_una {
                // D-SACK for data already forgotten: dumb counting.
                if e > self.undo.marker {
                    self.undo.retrans = (self.undo.retrans - dups as i32).max(0);
                }
            } else {
                // tcp_sacktag_one(dup_sack): each retransmitted segment the block covers.
                let n = self
                    .rtx
                    .iter()
                    .filter(|t| {
                        t.ever_retrans
                            && t.start >= s
                            && t.seq_end() <= e
                            && t.seq_end() > self.undo.marker
                    })
                    .count() as i32;
                self.undo.retrans = (self.undo.retrans - n).max(0);
            }
        }
        d
    }

    /// `tcp_retransmit_skb`'s bookkeeping: the episode's first retransmission time, one more
    /// retransmission to be shown spurious.
    pub(crate) fn undo_on_retransmit(&mut self, ts: u32) {
        if self.undo.retrans_stamp == 0 {
            self.undo.retrans_stamp = ts.max(1);
        }
        self.undo.retrans = self.undo.retrans.max(0) + 1;
    }

    /// `tcp_init_undo()`: a new episode; retransmissions still in flight may be D-SACKed later.
    pub(crate) fn init_undo(&mut self) {
        self.undo.marker = self.snd_una;
        self.undo.retrans = if self.retrans_out > 0 {
            self.retrans_out as i32
        } else {
            -1
        };
    }

    /// `tcp_current_ssthresh()`: what ssthresh to restore on an undo.
    pub(crate) fn current_ssthresh(&self) -> u32 {
        if self.in_cwnd_reduction() {
            self.ssthresh
        } else {
            self.ssthresh.max((self.cwnd >> 1) + (self.cwnd >> 2))
        }
    }

    pub(crate) fn set_prior_ssthresh(&mut self, v: u32) {
        self.undo.prior_ssthresh = v;
    }

    /// The state is Open: the episode's retransmission time is forgotten (`tcp_fastretrans_alert`).
    pub(crate) fn undo_open(&mut self) {
        self.undo.retrans_stamp = 0;
    }

    /// `tcp_any_retrans_done()`.
    fn any_retrans_done(&self) -> bool {
        self.retrans_out > 0 || self.rtx.front().is_some_and(|t| t.ever_retrans)
    }

    /// `tcp_packet_delayed()`: the ACK echoes a timestamp older than the first retransmission (the
    /// original arrived), or nothing was retransmitted — except on a NewReno connection, whose stamp
    /// `non_sack_preventing_reopen` clears after retransmitting.
    fn packet_delayed(&self) -> bool {
        let st = self.undo.retrans_stamp;
        if st == 0 {
            return self.sack_ok;
        }
        let e = self.undo.rcv_tsecr;
        self.ts_ok && e != 0 && (e.wrapping_sub(st) as i32) < 0
    }

    /// `tcp_may_undo()`.
    fn may_undo(&self) -> bool {
        self.undo.marker != 0 && (self.undo.retrans == 0 || self.packet_delayed())
    }

    /// `tcp_undo_cwnd_reduction()`: cwnd and ssthresh as before the cut (the module's `undo_cwnd`);
    /// `unmark_loss`: no segment is lost any more. RACK looks at the losses again.
    fn undo_cwnd_reduction(&mut self, unmark_loss: bool) {
        if unmark_loss {
            for t in self.rtx.iter_mut() {
                if t.lost {
                    t.lost = false;
                    if !t.retrans {
                        self.lost_pending -= 1;
                    }
                }
            }
            self.lost_out = 0;
        }
        if self.undo.prior_ssthresh != 0 {
            self.cwnd = self.ca_undo_cwnd();
            if self.undo.prior_ssthresh > self.ssthresh {
                self.ssthresh = self.undo.prior_ssthresh;
                // tcp_ecn_withdraw_cwr()
                self.ecn_queue_cwr = false;
            }
        }
        self.undo.marker = 0;
        self.rack.advanced = true;
    }

    /// The module's `undo_cwnd`: Reno's and CUBIC's (`tcp_reno_undo_cwnd`) and DCTCP's (whose
    /// `loss_cwnd` is the cwnd at the cut, `prior_cwnd` here) take the larger of now and before;
    /// BBR's keeps cwnd and forgets its full-pipe and policer estimates (`bbr_undo_cwnd`).
    fn ca_undo_cwnd(&mut self) -> u32 {
        if self.bbr_undo_cwnd() {
            return self.cwnd;
        }
        self.cwnd.max(self.prior_cwnd)
    }

    /// `tcp_try_undo_recovery()`, when Recovery or Loss is over: undo if it proved spurious
    /// (`TCPFullUndo`, `TCPLossUndo`), and go Open. Returns true when a Reno connection must stay in
    /// Recovery (`tcp_is_non_sack_preventing_reopen`).
    pub(crate) fn try_undo_recovery(&mut self) -> bool {
        if self.may_undo() {
            self.undo_cwnd_reduction(false);
            if self.ca_state == CaState::Loss {
                self.undo_stats.loss_undo += 1;
            } else {
                self.undo_stats.full_undo += 1;
            }
        } else if self.rack.reo_wnd_persist > 0 {
            self.rack.reo_wnd_persist -= 1;
        }
        if self.non_sack_preventing_reopen() {
            return true;
        }
        self.ca_state = CaState::Open;
        false
    }

    /// `tcp_is_non_sack_preventing_reopen()`: a NewReno sender holds the state until something above
    /// high_seq is acknowledged (RFC 6582), lest a retransmission of the same data look like loss.
    fn non_sack_preventing_reopen(&mut self) -> bool {
        if self.sack_ok || self.snd_una != self.high_seq {
            return false;
        }
        if !self.any_retrans_done() {
            self.undo.retrans_stamp = 0;
        }
        true
    }

    /// `tcp_try_undo_dsack()`: every retransmission of the episode was D-SACKed. The reordering
    /// window is kept wide one recovery longer.
    pub(crate) fn try_undo_dsack(&mut self) -> bool {
        if self.undo.marker != 0 && self.undo.retrans == 0 {
            self.rack.reo_wnd_persist =
                (self.rack.reo_wnd_persist + 1).min(TCP_RACK_RECOVERY_THRESH);
            self.undo_cwnd_reduction(false);
            self.undo_stats.dsack_undo += 1;
            return true;
        }
        false
    }

    /// `tcp_try_undo_loss()`: in Loss, an ACK advancing snd_una shows the timeout spurious (timestamps
    /// or D-SACKs), or F-RTO did (`frto_undo`): undo, forget the lost marks and go Open.
    pub(crate) fn try_undo_loss(&mut self, frto_undo: bool) -> bool {
        if !(frto_undo || self.may_undo()) {
            return false;
        }
        self.undo_cwnd_reduction(true);
        self.undo_stats.loss_undo += 1;
        if frto_undo {
            self.undo_stats.spurious_rtos += 1;
        }
        self.rto_retransmits = 0;
        if !self.non_sack_preventing_reopen() && (frto_undo || self.sack_ok) {
            self.ca_state = CaState::Open;
        }
        true
    }

    /// `tcp_enter_loss`'s F-RTO decision: a timeout that starts an episode, or repeats one on the same
    /// snd_una (RFC 5682 3.2). `new_recovery`: the state was below Recovery.
    pub(crate) fn frto_on_timeout(&mut self, new_recovery: bool) {
        self.undo.frto = self.cfg.frto && (new_recovery || self.rto_retransmits > 0);
        self.undo.rexmit_new = false;
        self.undo.hold_rexmit = false;
    }

    /// `tcp_process_loss()`: an ACK in Loss. Undo when it shows the timeout spurious (by timestamps,
    /// or F-RTO's step 3b: never-retransmitted data delivered); F-RTO's step 2b sends new data on the
    /// first ACK advancing snd_una, step 3a gives up on a SACK or duplicate ACK after it; the
    /// episode ends (and may be undone) once high_seq is acknowledged.
    pub(crate) fn process_loss(&mut self, prior_snd_una: u64, f: AckFlags) {
        let una_advanced = self.snd_una > prior_snd_una;
        let recovered = self.snd_una >= self.high_seq;
        if una_advanced && self.try_undo_loss(false) {
            return;
        }
        if self.undo.frto {
            if f.orig_sack_acked && self.try_undo_loss(true) {
                return;
            }
            if self.snd_nxt > self.high_seq {
                if f.data_sacked || f.dup {
                    self.undo.frto = false;
                }
            } else if una_advanced && !recovered {
                self.high_seq = self.snd_nxt;
                if self.snd_nxt < self.send_limit_end()
                    && self.snd_una + self.snd_wnd > self.snd_nxt
                {
                    self.undo.rexmit_new = true;
                    return;
                }
                self.undo.frto = false;
            }
        }
        if recovered {
            self.try_undo_recovery();
        }
    }

    /// `tcp_xmit_recovery(REXMIT_NEW)`, once no new data can go: if some went past high_seq, no
    /// retransmission until the next ACK; else F-RTO gives up.
    pub(crate) fn frto_new_data_done(&mut self) {
        self.undo.rexmit_new = false;
        if self.snd_nxt > self.high_seq {
            self.undo.hold_rexmit = true;
        } else {
            self.undo.frto = false;
        }
    }

    /// `tcp_try_undo_partial()`: a partial ACK in Recovery whose timestamp shows the hole filled by
    /// the original: reordering, larger than thought. With retransmissions still out, send new data
    /// but mark nothing more lost and retransmit nothing on this ACK (true: the caller holds
    /// retransmissions); else undo (`TCPPartialUndo`).
    pub(crate) fn try_undo_partial(&mut self, prior_snd_una: u64) -> bool {
        if self.undo.marker == 0 || !self.packet_delayed() {
            return false;
        }
        self.check_sack_reordering(prior_snd_una);
        if self.retrans_out > 0 {
            return true;
        }
        if !self.any_retrans_done() {
            self.undo.retrans_stamp = 0;
        }
        self.undo_cwnd_reduction(true);
        self.undo_stats.partial_undo += 1;
        self.try_keep_open();
        false
    }

    /// `tcp_check_sack_reordering()`: `low_seq`, below the highest SACK, was delivered after it.
    /// The reordering degree grows to the distance in segments (at most `tcp_max_reordering`).
    pub(crate) fn check_sack_reordering(&mut self, low_seq: u64) {
        let fack = self.fack(self.snd_una);
        if low_seq >= fack {
            return;
        }
        let metric = fack - low_seq;
        let mss = self.mss as u64;
        if mss > 0 && metric > self.reordering as u64 * mss {
            self.reordering = (metric.div_ceil(mss) as u32).min(TCP_MAX_REORDERING);
        }
        self.reord_seen += 1;
    }
}
