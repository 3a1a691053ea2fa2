//! Host scheduling delay: the occasional late softirq of a real Linux host, drawn from the run's seed.
//!
//! A simulated host keeps perfect time; a Linux host does not. Three of its delays move TCP's ACK clock:
//!
//! - **A shaper's late dequeue.** A qdisc that holds packets back arms its watchdog (an hrtimer; here
//!   an interface's root qdisc, not an ifb's or teql0's, which keep perfect time); the
//!   timer's interrupt only raises NET_TX, and the softirq that dequeues runs when the CPU gets to it —
//!   at once, or after ksoftirqd is scheduled behind other work. The next packet then leaves late, and
//!   the shaper's tokens, having kept accruing, let the one after follow sooner.
//! - **A paced sender's late pacing timer.** A socket that paces itself (internal pacing, Linux's
//!   `SK_PACING_NEEDED`) holds its next segment until its departure time and arms an hrtimer for it;
//!   the timer runs in softirq (`tcp_pace_kick`, then `tcp_tsq_handler` writes), as late as a shaper's
//!   watchdog: the same path, the same host, so the same table (`tx`), drawn from a stream of its own.
//!   The segment leaves late, and `tcp_update_skb_after_send`'s credit lets the next follow sooner;
//!   an ACK arriving meanwhile finds the departure time passed and sends at once, as Linux's does.
//! - **A socket's late receive.** A segment that arrives while the socket's owner holds its lock (the
//!   application in a read or write) waits in the socket's backlog until `release_sock`, and a
//!   receiver's held ACK goes out only at the application's read (`tcp_cleanup_rbuf`): the segment is
//!   processed, and its ACK sent, as late as the application is scheduled.
//!
//! Measured on this project's machine (docs/KERNEL_VS_SIM.md, "Host scheduling delay": tcpdump at the
//! server's veth, HTB 10 Mbit/s on the router, one BBR stream, iperf3 at `chrt -f 20`), both are
//! almost always a few µs, and with a chance of about 1 % (a dequeue) or 0.2 % (an ACK) late by an
//! exponential tail of mean ~400 µs, now and then past a millisecond, more often the busier the
//! machine. The model keeps that tail only: each event is late with a given chance, by a delay drawn
//! from an exponential distribution of a given mean; the µs below it move nothing a sender sees. Neither delay reorders anything: a late watchdog delays the dequeue, not the
//! queue's order, and a socket's backlog is processed in arrival order, later segments waiting behind
//! a late one ([`crate::net::Network`]).
//!
//! Scenario key (top level; both parts optional, none = a host that keeps perfect time):
//!
//! ```toml
//! [sched_delay]
//! tx = "1.3% 400us"   # each shaper watchdog's dequeue and each pacing timer's wake-up is late with
//!                     # chance 1.3 %, by 400 µs on average
//! rx = "0.11% 400us"  # each segment a TCP socket receives (its backlog empty), chance 0.11 %
//! ```
//!
//! `tx = "0.14% 590us max 1211us"` cuts the exponential at 1.211 ms: on a quiet host a late softirq
//! waits for the CPU's next interrupt, and where a shaper's watchdog is the only timer that is its next
//! one, a frame's time later (10 Mbit/s, 1514 bytes); measured so, docs/KERNEL_VS_SIM.md, "One frame
//! late".

use crate::rng::Rng;
use tclab_core::Nanos;

/// One kind of event's lateness: with `chance_ppm` in a million, late by an exponentially distributed
/// delay of mean `mean` (at least 1 ns, at most 1 s, and at most `max` when given), or by exactly
/// `mean` when `fixed`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lateness {
    /// Chance per event, in parts per million (0: never late).
    pub chance_ppm: u32,
    /// The delay's mean, ns.
    pub mean: Nanos,
    /// Every late event late by exactly `mean` (for experiments and hand-derived tests).
    pub fixed: bool,
    /// The longest delay (0: none beyond 1 s): the exponential cut there, its tail late by exactly
    /// this. A softirq left pending runs at the CPU's next interrupt, and on a host whose only timer
    /// is a shaper's watchdog that is its next one, a frame's time later (docs/KERNEL_VS_SIM.md,
    /// "One frame late").
    pub max: Nanos,
}

impl Lateness {
    /// `"P% MEAN"`: a chance in percent (at most 100, up to four decimals) and the delay's mean
    /// (`400us`, `1.2ms`, at most 100 ms); `"P% DELAY fixed"`: late by exactly DELAY;
    /// `"P% MEAN max LIMIT"`: the exponential cut at LIMIT (at most 100 ms, not under 1 µs).
    pub fn parse(s: &str) -> Result<Lateness, String> {
        let w: Vec<&str> = s.split_whitespace().collect();
        let (p, d, rest) = match w.as_slice() {
            [p, d, rest @ ..] if rest.len() <= 2 => (*p, *d, rest),
            _ => {
                return Err(format!(
                    "expected \"CHANCE% MEANDELAY\" (e.g. \"1% 400us\"), \"CHANCE% MEANDELAY max LIMIT\" or \"CHANCE% DELAY fixed\", got \"{s}\""
                ))
            }
        };
        let (fixed, max) = match rest {
            [] => (false, 0),
            ["fixed"] => (true, 0),
            ["max", l] => {
                let max = crate::scenario::parse_duration(l)
                    .ok()
                    .filter(|m| (1_000..=MAX_MEAN).contains(m))
                    .ok_or_else(|| {
                        format!("invalid max \"{l}\": a time from 1us to 100ms (e.g. 1.2ms)")
                    })?;
                (false, max)
            }
            [other, ..] => {
                return Err(format!(
                    "unknown word \"{other}\" (only \"fixed\", or \"max\" and a time)"
                ))
            }
        };
        let chance_ppm = p
            .strip_suffix('%')
            .and_then(|p| p.parse::<f64>().ok())
            .filter(|p| p.is_finite() && (0.0..=100.0).contains(p))
            .map(|p| (p * 10_000.0).round() as u32)
            .ok_or_else(|| format!("invalid chance \"{p}\": a percentage from 0% to 100%"))?;
        // A chance below the model's resolution would round to never, switching it off unsaid.
        if chance_ppm == 0 && p.trim_end_matches('%').parse::<f64>() != Ok(0.0) {
            return Err(format!(
                "chance \"{p}\" is below 0.0001% (one in a million), the smallest the model takes"
            ));
        }
        let mean = crate::scenario::parse_duration(d)
            .ok()
            .filter(|&m| m <= MAX_MEAN)
            .ok_or_else(|| format!("invalid delay \"{d}\": a time up to 100ms (e.g. 400us)"))?;
        if chance_ppm > 0 && mean == 0 {
            return Err(format!("delay \"{d}\" is zero with a chance of {p}"));
        }
        Ok(Lateness {
            chance_ppm,
            mean,
            fixed,
            max,
        })
    }

    /// Whether the model is on (it draws nothing when off, so a run without it is unchanged).
    pub fn on(&self) -> bool {
        self.chance_ppm > 0
    }

    /// How late this event is: 0, or a delay in [1 ns, 1 s] (the inverse of the exponential CDF).
    pub fn draw(&self, rng: &mut Rng) -> Nanos {
        if rng.below(1_000_000) >= self.chance_ppm as u64 {
            return 0;
        }
        if self.fixed {
            return self.mean;
        }
        let d = -(self.mean as f64) * (1.0 - rng.next_f64()).ln();
        let d = (d as Nanos).clamp(1, tclab_core::NSEC_PER_SEC);
        if self.max > 0 {
            d.min(self.max)
        } else {
            d
        }
    }
}

/// The largest mean a scenario may give (a host late by more is not a model of scheduling).
const MAX_MEAN: Nanos = 100_000_000;

/// A run's scheduling delays and the streams they draw from (one each, named by purpose).
#[derive(Clone, Debug)]
pub struct SchedDelay {
    pub tx: Lateness,
    pub rx: Lateness,
    tx_rng: Rng,
    rx_rng: Rng,
    pace_rng: Rng,
}

impl SchedDelay {
    pub fn new(seed: u64, tx: Lateness, rx: Lateness) -> SchedDelay {
        SchedDelay {
            tx,
            rx,
            tx_rng: Rng::stream(seed, "sched:tx"),
            rx_rng: Rng::stream(seed, "sched:rx"),
            pace_rng: Rng::stream(seed, "sched:pace"),
        }
    }

    /// How late a shaper watchdog's dequeue runs (0 when the model is off; nothing drawn then).
    pub fn tx_late(&mut self) -> Nanos {
        if self.tx.on() {
            self.tx.draw(&mut self.tx_rng)
        } else {
            0
        }
    }

    /// How late a paced socket's pacing timer runs (the `tx` table; its own stream, so that the
    /// shapers' draws are those of a run without paced senders).
    pub fn pace_late(&mut self) -> Nanos {
        if self.tx.on() {
            self.tx.draw(&mut self.pace_rng)
        } else {
            0
        }
    }

    /// How late a TCP socket processes a segment that finds its backlog empty.
    pub fn rx_late(&mut self) -> Nanos {
        if self.rx.on() {
            self.rx.draw(&mut self.rx_rng)
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_chance_and_delay() {
        assert_eq!(
            Lateness::parse("0.11% 400us"),
            Ok(Lateness {
                chance_ppm: 1_100,
                mean: 400_000,
                fixed: false,
                max: 0
            })
        );
        assert_eq!(
            Lateness::parse(" 100%  1.2ms "),
            Ok(Lateness {
                chance_ppm: 1_000_000,
                mean: 1_200_000,
                fixed: false,
                max: 0
            })
        );
        let f = Lateness::parse("100% 1ms fixed").unwrap();
        assert!(f.fixed && f.mean == 1_000_000);
        assert_eq!(f.draw(&mut Rng::stream(1, "t")), 1_000_000);
        assert_eq!(Lateness::parse("0% 0s").map(|l| l.on()), Ok(false));
        assert_eq!(Lateness::parse("0.000% 1ms").map(|l| l.on()), Ok(false));
        assert_eq!(Lateness::parse("0.0001% 1ms").map(|l| l.chance_ppm), Ok(1));
        for bad in [
            "0.1%",
            "0.1 500us",
            "101% 1ms",
            "-1% 1ms",
            "1% 1s",
            "1% 0s",
            "1% x",
            "a b c",
            "1% 1ms fixed x",
            "1% 1ms max",
            "1% 1ms max 0s",
            "1% 1ms max 101ms",
            "1% 1ms fixed max 2ms",
            "1% 1ms max 2ms x",
            "0.00001% 400us",
            "0.00004% 1ms",
        ] {
            assert!(Lateness::parse(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn draws_follow_chance_and_an_exponential_tail() {
        // 1 000 000 events at 1 %: binomial mean 10 000, sd 99.5; ±4 % is 4 sd. An exponential of
        // mean 400 µs: the sample mean within 4 % (sd of the mean 4 µs = 1 %), a delay beyond the
        // mean with chance e^-1 = 0.368 (±0.02: 4 sd), beyond three means e^-3 = 0.0498 (±0.01).
        let l = Lateness::parse("1% 400us").unwrap();
        let mut r = Rng::stream(3, "t");
        let d: Vec<Nanos> = (0..1_000_000)
            .map(|_| l.draw(&mut r))
            .filter(|&d| d > 0)
            .collect();
        let n = d.len() as f64;
        assert!((9_600.0..=10_400.0).contains(&n), "{n} late");
        let mean = d.iter().sum::<u64>() as f64 / n;
        assert!((384_000.0..=416_000.0).contains(&mean), "mean {mean}");
        let beyond = |x: u64| d.iter().filter(|&&v| v > x).count() as f64 / n;
        assert!(
            (beyond(400_000) - (-1f64).exp()).abs() < 0.02,
            "{}",
            beyond(400_000)
        );
        assert!(
            (beyond(1_200_000) - (-3f64).exp()).abs() < 0.01,
            "{}",
            beyond(1_200_000)
        );
    }

    #[test]
    fn a_max_cuts_the_tail_and_leaves_the_draws_below_it() {
        // An exponential of mean 510 µs cut at 1.21 ms (a 1514-byte frame at 10 Mbit/s): a share e^(-1210/510) = 0.0933 of the late events sits exactly at the cut
        // (±0.008: 4 sd of 20 000 draws), nothing beyond it, and each draw below the cut is the
        // uncut model's own draw (the same stream, the same number of draws).
        let cut = Lateness::parse("100% 510us max 1.21ms").unwrap();
        assert_eq!(cut.max, 1_210_000);
        let plain = Lateness::parse("100% 510us").unwrap();
        let (mut a, mut b) = (Rng::stream(5, "t"), Rng::stream(5, "t"));
        let d: Vec<(Nanos, Nanos)> = (0..20_000)
            .map(|_| (cut.draw(&mut a), plain.draw(&mut b)))
            .collect();
        assert!(d.iter().all(|&(c, p)| c == p.min(1_210_000)));
        let at = d.iter().filter(|&&(c, _)| c == 1_210_000).count() as f64 / 20_000.0;
        assert!((at - (-1210.0f64 / 510.0).exp()).abs() < 0.008, "{at}");
    }

    #[test]
    fn off_draws_nothing() {
        let mut s = SchedDelay::new(1, Lateness::default(), Lateness::default());
        assert!((0..1000).all(|_| s.tx_late() == 0 && s.rx_late() == 0 && s.pace_late() == 0));
        // The streams were not advanced: a model switched on later draws what a fresh one does.
        let on = Lateness::parse("50% 400us").unwrap();
        s.tx = on;
        let mut fresh = SchedDelay::new(1, on, Lateness::default());
        assert_eq!(
            (0..20).map(|_| s.tx_late()).collect::<Vec<_>>(),
            (0..20).map(|_| fresh.tx_late()).collect::<Vec<_>>()
        );
    }
}
