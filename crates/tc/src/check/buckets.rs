//! Token buckets of TBF and of policers: smaller than a packet (nothing of full size ever passes: TBF
//! drops a packet longer than its bucket, `tbf_enqueue`; a policer never finds the tokens for it,
//! `tcf_police_act`), so large that they never act within a measurement (the first seconds of every
//! transfer go at the line's rate), below one timer tick of the rate; TBF's queue of a packet or two;
//! a policer's burst below what TCP needs at its rate.

use super::{DevCx, Finding, HZ};
use crate::util::{sprint_rate, sprint_size};
use tclab_core::action::ActionParams;
use tclab_core::qdisc::QdiscOptions;
use tclab_core::units::{ticks_to_ns, RateCfg};

/// A bucket that holds more than this many seconds of its rate never acts within a test of ordinary
/// length: a transfer of that long after an idle period passes at the line's rate.
const HUGE_SECONDS: u64 = 10;

/// TBF's queue must hold a few packets for TCP: a window's worth arriving while the bucket is empty is
/// otherwise dropped, each drop halving the window.
const SHORT_LIMIT_PACKETS: u32 = 3;

pub(super) fn check(cx: &DevCx, out: &mut Vec<Finding>) {
    let frame = cx.mtu as u64;
    for q in &cx.qdiscs {
        let QdiscOptions::Tbf(t) = &q.options else {
            continue;
        };
        let at = cx.qdisc_at(q);
        let line = cx.qdisc_line(q);
        let rate = RateCfg::new(&t.rate);
        // The largest packet TBF sends (`max_size` in `tbf_change`): what the bucket holds, or the
        // peak bucket if smaller.
        let mut bucket = match t.burst {
            Some(b) => b as u64,
            None => rate.ns_t2l(ticks_to_ns(t.buffer as u64)),
        };
        if t.peakrate.rate != 0 {
            let peak = RateCfg::new(&t.peakrate);
            bucket = bucket.min(match t.pburst {
                Some(p) => p as u64,
                None => peak.ns_t2l(ticks_to_ns(t.mtu as u64)),
            });
        }
        let r = t.rate.rate.max(1);
        if bucket < frame {
            out.push(
                Finding::new(
                    "bucket-below-packet",
                    at.clone(),
                    format!(
                        "its bucket holds {bucket} bytes, less than one {frame}-byte frame: TBF drops \
                         every packet longer than its bucket, so full-size packets never pass (a TCP \
                         transfer gets nothing through)"
                    ),
                    format!(
                        "`burst` of at least one frame plus a tick of the rate: `burst {}`",
                        frame + r / HZ
                    ),
                )
                .line(line),
            );
        } else if bucket / r > HUGE_SECONDS {
            out.push(huge(&at, "TBF", bucket, r).line(line));
        } else {
            let hz = cx.opts.hz.unwrap_or(HZ);
            // Tick rounding leaves tc's own `rate/HZ` a byte or two short: within 1 % is the tick.
            if bucket * 100 < r / hz * 99 {
                out.push(
                    Finding::new(
                        "burst-below-tick",
                        at.clone(),
                        format!(
                            "burst {bucket} bytes is less than what {} sends in one tick of a {hz} Hz \
                             timer ({} bytes): on a tick-based kernel TBF cannot reach its rate",
                            sprint_rate(r),
                            r / hz
                        ),
                        format!("`burst {}` at least (rate/HZ and a frame)", r / hz + frame),
                    )
                    .line(line),
                );
            }
        }
        if t.limit < SHORT_LIMIT_PACKETS * frame as u32 {
            out.push(
                Finding::new(
                    "tbf-limit-short",
                    at,
                    format!(
                        "its queue (`limit`) holds {} bytes, {} full frame{}: while the bucket is empty, \
                         every packet beyond that is dropped, and TCP, which sends its window in bursts, \
                         loses packets on every burst and never reaches the rate",
                        t.limit,
                        t.limit as u64 / frame,
                        if t.limit as u64 / frame == 1 { "" } else { "s" }
                    ),
                    format!(
                        "give TBF `latency 50ms` (tc computes the limit: {} at this rate) or a `limit` \
                         of many frames",
                        sprint_size((r / 20 + bucket).min(u32::MAX as u64) as u32)
                    ),
                )
                .line(line),
            );
        }
    }
    // Policers in this device's filters.
    for a in cx.actions.iter().filter(|a| a.dev == cx.name) {
        let ActionParams::Police(p) = &a.params else {
            continue;
        };
        let Some(spec) = p.rate.as_ref().filter(|s| s.rate > 0) else {
            continue;
        };
        let rate = RateCfg::new(spec);
        let bucket = rate.ns_t2l(ticks_to_ns(p.burst as u64));
        // `mtu` (or tc's default, 2040 when a rate is given) bounds the packets that can conform.
        let mtu = if p.mtu != 0 { p.mtu as u64 } else { 2040 };
        let largest = bucket.min(mtu);
        let at = a.at();
        let line = a.line(cx.origins);
        if largest < frame {
            out.push(
                Finding::new(
                    "bucket-below-packet",
                    at,
                    format!(
                        "its policer's {} holds {largest} bytes, less than one {frame}-byte frame: a \
                         full-size packet never finds the tokens and always exceeds, so a TCP transfer \
                         through it gets nothing",
                        if bucket <= mtu { "burst" } else { "mtu" }
                    ),
                    format!(
                        "`burst` of at least several frames (`burst {}` is 10 ms at this rate and a \
                         frame)",
                        sprint_size((spec.rate / 100 + frame).min(u32::MAX as u64) as u32)
                    ),
                )
                .line(line),
            );
        } else if bucket / spec.rate > HUGE_SECONDS {
            out.push(huge(&at, "the policer", bucket, spec.rate).line(line));
        } else if let Some(f) = police_short(&at, bucket, spec.rate, frame) {
            out.push(f.line(line));
        }
    }
}

fn huge(at: &str, what: &str, bucket: u64, rate: u64) -> Finding {
    Finding::new(
        "bucket-too-large",
        at,
        format!(
            "{what}'s bucket holds {bucket} bytes, {} s at its rate {}: after any idle moment that much \
             passes at the line's full rate, so it does not act within a test of ordinary length",
            bucket / rate,
            sprint_rate(rate)
        ),
        format!(
            "a bucket of a few milliseconds at the rate: `burst {}` (10 ms)",
            sprint_size((rate / 100).clamp(1600, u32::MAX as u64) as u32)
        ),
    )
}

/// A policer's bucket that holds less than this much time at its rate, or fewer than
/// [`POLICE_FRAMES`] full frames, is short of what TCP needs: Juniper's guidance for policers
/// ("Determining Proper Burst Size for Traffic Policers": not below 10 × the MTU, not below 5 ms of
/// traffic).
const POLICE_MS: u64 = 5;
const POLICE_FRAMES: u64 = 10;
/// … unless those frames take longer than this at the rate.
const POLICE_FRAMES_MS: u64 = 20;

/// A policer whose burst is below what TCP needs at its rate. A sender's ACK-clocked and GSO bursts
/// arrive at the line's rate, far above the policer's: what the bucket cannot hold is dropped, and
/// TCP backs off far below the rate. Simulated (`tclab sim`, one CUBIC download through an ingress
/// `police rate 50mbit … drop`, 100 Mbit/s last hop, 20 ms RTT, 20 s): burst 10k 8.6 Mbit/s (17 %),
/// 16k 16.5, 20k 38.9, 32k 40.4 (81 %), 64k 43.2, 125k 43.7, 625k 48.2; at 10mbit: 5k 1.5, 8k 4.0,
/// 15k 6.7, 30k 9.2 (92 %), 60k 9.6; at 800kbit: 5k 690 kbit/s, 10k 773 (97 %); at 2mbit: 10k 1.87.
fn police_short(at: &str, bucket: u64, rate: u64, frame: u64) -> Option<Finding> {
    // Ten frames only where they are more than a few round trips' worth of nothing: at 800 kbit/s a
    // 10k bucket (6 frames, 100 ms) passed 97 % of the rate in the same simulation.
    let frames = (POLICE_FRAMES * frame).min(rate * POLICE_FRAMES_MS / 1000);
    let least = (rate * POLICE_MS / 1000).max(frames);
    if bucket >= least {
        return None;
    }
    // A round trip's worth (20 ms) and 20 frames: where the simulated download came within 10 %.
    let suggest = (rate / 50).max(20 * frame).min(u32::MAX as u64) as u32;
    Some(Finding::new(
        "police-burst-short",
        at,
        format!(
            "its policer's burst holds {bucket} bytes, {:.1} ms at its rate {} ({} full frames): \
             TCP sends in bursts at the sender's line rate, what the bucket cannot hold is dropped, \
             and the transfer backs off far below the rate (simulated, one download through `police \
             rate 50mbit burst 10k`: 8.6 Mbit/s, 17 %; with `burst 32k`, 40 Mbit/s)",
            bucket as f64 * 1000.0 / rate as f64,
            sprint_rate(rate),
            bucket / frame
        ),
        format!(
            "`burst {}` (20 ms at the rate: a round trip's worth); at least {} (vendors' floor for \
             policers: {POLICE_MS} ms at the rate and {POLICE_FRAMES} frames)",
            sprint_size(suggest),
            sprint_size(least.min(u32::MAX as u64) as u32)
        ),
    ))
}
