//! When the bridge's loop spins and when it sleeps.
//!
//! Two waits, two rules. **Idle** (no frame this turn): the loop polls its sockets for a while
//! before it sleeps in `ppoll`, since a frame caught while spinning costs no wake-up. Spinning is
//! spin-then-block's ski rental: spinning longer than a sleep and its wake-up cost never saves CPU,
//! and spinning exactly that long costs at most twice the better choice made in hindsight (Karlin,
//! Li, Manasse, Owicki, *Empirical studies of competitive spinning for a shared-memory
//! multiprocessor*, SOSP 1991). So the window never exceeds the measured CPU cost of a sleep
//! ([`IdleSpin::slept`]: the thread's CPU time across a `ppoll` that blocked), and within that
//! bound it adapts as KVM's halt polling does (`grow_halt_poll_ns`/`shrink_halt_poll_ns`), judged
//! at each frame by the gap before it: a gap longer than the bound halves it (down to none: a pure
//! `ppoll` wait), one within the bound but longer than the window doubles it, one the window
//! caught leaves it. It starts at none. A steady stream with short gaps keeps a window; traffic
//! whose gaps are longer than a wake-up costs (a lab's senders sharing the cores with the bridge)
//! sleeps at once, leaving the cores to them.
//!
//! **A shaper's deadline**: the loop sleeps until the deadline less the sleeps' usual overshoot and
//! spins the rest, so only a deadline within that overshoot is spun for. The overshoot is learnt as
//! TCP learns its retransmission timeout (RFC 6298: smoothed mean plus four mean deviations, gains
//! 1/8 and 1/4) from the `ppoll` timeouts themselves, and bounded by [`SPIN_NS`]; a shaper accounts
//! time over its burst, so a wake-up late by less than the burst loses no rate.
//!
//! **Never sleeping** (frames and deadlines always within those windows, at hundreds of Mbit/s): a
//! real-time thread is then stopped by the kernel for 50 ms each second, so [`BusyCap`] has it pause
//! a little whenever it ran more than 90 % of the last 2 ms.

use tclab_core::Nanos;

/// How long the busy share is measured over before [`BusyCap`] judges it.
pub const BUSY_WINDOW_NS: u64 = 2_000_000;
/// The share of its time the loop may run; above it, it pauses down to [`BUSY_TARGET`].
const BUSY_MAX: f64 = 0.90;
const BUSY_TARGET: f64 = 0.85;
/// The longest pause: what a shaper's burst should absorb (at 1 Gbit/s, 62 KB).
pub const PAUSE_MAX_NS: u64 = 500_000;

/// Keeps a loop that never sleeps (frames or deadlines always within its spin windows) under the
/// kernel's real-time throttling. A `SCHED_FIFO` thread that runs more than 950 ms of a second is
/// stopped for the rest of it (`sched_rt_runtime_us`): measured at 500 Mbit/s, a wake-up 48 ms
/// late, far beyond any shaper's burst, and 7.6 % of the rate lost. Run at most 90 % of each
/// 2 ms instead, pausing a few hundred µs at a time, which a shaper's burst absorbs.
#[derive(Clone, Debug, Default)]
pub struct BusyCap {
    /// Where the current window started: wall and thread CPU time, in ns.
    start: Option<(u64, u64)>,
    /// Pauses taken, and their total, in ns.
    pub pauses: u64,
    pub paused_ns: u64,
}

impl BusyCap {
    /// Whether a window has ended at wall time `wall` (then read the CPU clock for [`BusyCap::judge`]).
    pub fn due(&self, wall: u64) -> bool {
        self.start
            .is_none_or(|(w, _)| wall.saturating_sub(w) >= BUSY_WINDOW_NS)
    }

    /// The window ends at `wall` with the thread's CPU clock at `cpu`: how long to pause, if the
    /// loop ran more than its share of it. A new window starts.
    pub fn judge(&mut self, wall: u64, cpu: u64) -> Option<u64> {
        let (w0, c0) = self.start.replace((wall, cpu))?;
        let span = wall.saturating_sub(w0);
        let ran = cpu.saturating_sub(c0);
        if span == 0 || (ran as f64) <= BUSY_MAX * span as f64 {
            return None;
        }
        // Idle enough that the window's share falls to the target: ran / (span + p) = target.
        let pause = ((ran as f64 / BUSY_TARGET) - span as f64).max(0.0) as u64;
        let pause = pause.min(PAUSE_MAX_NS);
        self.pauses += 1;
        self.paused_ns += pause;
        // The pause belongs to the next window.
        self.start = Some((wall + pause, cpu));
        Some(pause)
    }
}

/// The longest idle spin, whatever a sleep costs (and the bound until one has been measured).
pub const IDLE_SPIN_NS: u64 = 20_000;
/// The longest spin before a shaper's deadline.
pub const SPIN_NS: u64 = 50_000;
/// The shortest idle window: below it the loop does not spin at all.
const MIN_SPIN_NS: u64 = 1_000;

/// The loop's spin windows, learnt from its own sleeps.
#[derive(Clone, Debug)]
pub struct IdleSpin {
    /// How long the loop polls after the last frame before it sleeps.
    window: u64,
    /// Smoothed CPU cost of a sleep in `ppoll` (entry, switch out, wake-up, switch in), in ns;
    /// `None` before the first.
    sleep_cpu: Option<u64>,
    /// Smoothed overshoot of a `ppoll` timeout and its mean deviation, in ns.
    overshoot: u64,
    overshoot_dev: u64,
    /// Sleeps so far (see [`IdleSpin::measure`]).
    sleeps: u32,
}

impl Default for IdleSpin {
    fn default() -> Self {
        IdleSpin::new()
    }
}

impl IdleSpin {
    /// Before any measurement: no idle spin (the first sleeps measure what one costs, which a window
    /// that caught every frame never would), the cost of a sleep its first measurement,
    /// and an overshoot of 10 µs ± 5 µs (a `ppoll` with 1 ns slack under `SCHED_FIFO` on an idle
    /// machine: a few µs; a loaded one: tens).
    pub fn new() -> IdleSpin {
        IdleSpin {
            window: 0,
            sleep_cpu: None,
            overshoot: 10_000,
            overshoot_dev: 5_000,
            sleeps: 0,
        }
    }

    /// How long to poll after the last frame before sleeping.
    pub fn window(&self) -> u64 {
        self.window
    }

    /// The bound on the idle window: no longer than a sleep costs.
    fn bound(&self) -> u64 {
        self.sleep_cpu
            .unwrap_or(IDLE_SPIN_NS)
            .clamp(MIN_SPIN_NS, IDLE_SPIN_NS)
    }

    /// How long before a deadline the loop stops sleeping and spins.
    pub fn margin(&self) -> u64 {
        (self.overshoot + 4 * self.overshoot_dev).min(SPIN_NS)
    }

    /// A frame arrived `gap` ns after the previous one, the loop idle in between. As
    /// `kvm_vcpu_halt` judges a halt: caught by the window, nothing changes; a gap no allowed
    /// window would have caught halves it, down to none; one a longer window would have caught
    /// doubles it.
    pub fn frame(&mut self, gap: Nanos) {
        if gap <= self.window {
            return;
        }
        if gap > self.bound() {
            self.window /= 2;
            if self.window < MIN_SPIN_NS {
                self.window = 0;
            }
        } else {
            self.window = (self.window * 2).clamp(MIN_SPIN_NS, self.bound());
        }
    }

    /// Whether to measure the CPU cost of the next sleep (reading the thread's CPU clock is a
    /// system call, where the monotonic clock is not): the first 16, then one in 16.
    pub fn measure(&mut self) -> bool {
        self.sleeps = self.sleeps.wrapping_add(1);
        self.sleeps <= 16 || self.sleeps.is_multiple_of(16)
    }

    /// A `ppoll` returned: it ran `cpu` ns of the thread's time (if measured) over `wall` ns;
    /// `asked` is the timeout it was given, `timed_out` whether that timeout ended it.
    pub fn slept(&mut self, cpu: Option<u64>, wall: u64, asked: Option<u64>, timed_out: bool) {
        // Only a call that blocked measures a sleep (one that returned at once costs less).
        if let Some(cpu) = cpu.filter(|&c| wall > c + MIN_SPIN_NS) {
            self.sleep_cpu = Some(self.sleep_cpu.map_or(cpu, |avg| ewma(avg, cpu, 3)));
            self.window = self.window.min(self.bound());
        }
        if let (true, Some(asked)) = (timed_out, asked) {
            let late = wall.saturating_sub(asked);
            let err = late.abs_diff(self.overshoot);
            self.overshoot_dev = ewma(self.overshoot_dev, err, 2);
            self.overshoot = ewma(self.overshoot, late, 3);
        }
    }
}

/// `avg + (x - avg) / 2^shift` in integers.
fn ewma(avg: u64, x: u64, shift: u32) -> u64 {
    if x >= avg {
        avg + ((x - avg) >> shift)
    } else {
        avg - ((avg - x) >> shift)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sleeps that cost `cpu` ns each, ended by frames `gap` ns after the last, `n` times.
    fn gaps(s: &mut IdleSpin, cpu: u64, gap: u64, n: usize) {
        for _ in 0..n {
            if gap > s.window() {
                s.slept(Some(cpu), gap.max(cpu + 2_000), None, false);
            }
            s.frame(gap);
        }
    }

    #[test]
    fn gaps_longer_than_a_sleep_costs_end_in_a_pure_ppoll_wait() {
        // 5 µs a sleep, frames 12 µs apart (a 1514-byte frame at 1 Gbit/s): spinning for them would
        // cost more than the wake-ups it saves.
        let mut s = IdleSpin::new();
        gaps(&mut s, 5_000, 12_000, 40);
        assert_eq!(s.window(), 0);
    }

    #[test]
    fn gaps_shorter_than_a_sleep_costs_keep_a_window_that_catches_them() {
        // 5 µs a sleep, frames 3 µs apart: from a pure ppoll wait the window grows back to catch them.
        let mut s = IdleSpin::new();
        gaps(&mut s, 5_000, 12_000, 40);
        gaps(&mut s, 5_000, 3_000, 10);
        assert!(s.window() >= 3_000 && s.window() <= 5_000, "{}", s.window());
        // Caught by the spin from now on: no more sleeps, the window stays.
        let w = s.window();
        gaps(&mut s, 5_000, 3_000, 100);
        assert_eq!(s.window(), w);
    }

    #[test]
    fn the_window_never_exceeds_the_cost_of_a_sleep_nor_the_fixed_bound() {
        let mut s = IdleSpin::new();
        gaps(&mut s, 2_000, 1_500, 50);
        assert!(s.window() <= 2_000 + 2_000 / 8, "{}", s.window());
        let mut s = IdleSpin::new();
        gaps(&mut s, 80_000, 10_000, 50);
        assert!(s.window() <= IDLE_SPIN_NS);
    }

    #[test]
    fn a_loop_busy_all_the_time_pauses_to_its_share_and_one_that_sleeps_does_not() {
        let mut c = BusyCap::default();
        assert!(c.due(0));
        assert_eq!(c.judge(0, 0), None, "the first look starts a window");
        assert!(!c.due(1_999_999) && c.due(2_000_000));
        // Ran all of 2 ms: pause until 2 ms is 85 % of the window, 353 µs.
        let p = c.judge(2_000_000, 2_000_000).expect("a pause");
        assert_eq!(p, 352_941);
        // The next window starts after the pause: 1.5 ms run of 2 ms (75 %) is within the share.
        assert!(!c.due(2_000_000 + p + 1_999_999));
        assert_eq!(c.judge(2_000_000 + p + 2_000_000, 3_500_000), None);
        // 95 % of a window: a pause that brings it to 85 %.
        let (w, cpu) = (2_000_000 + p + 4_000_000, 3_500_000 + 1_900_000);
        assert_eq!(c.judge(w, cpu), Some(235_294));
        assert_eq!(c.pauses, 2);
        // A long window (the loop slept in ppoll) run flat out is capped at PAUSE_MAX_NS.
        let mut c = BusyCap::default();
        c.judge(0, 0);
        assert_eq!(c.judge(100_000_000, 100_000_000), Some(PAUSE_MAX_NS));
    }

    #[test]
    fn the_margin_before_a_deadline_follows_the_timer_overshoot() {
        let mut s = IdleSpin::new();
        for _ in 0..200 {
            s.slept(Some(3_000), 100_000 + 4_000, Some(100_000), true);
        }
        // A steady 4 µs overshoot: the deviation decays, the margin nears 4 µs.
        assert!((4_000..5_000).contains(&s.margin()), "{}", s.margin());
        for _ in 0..200 {
            s.slept(None, 100_000 + 900_000, Some(100_000), true);
        }
        // A loaded machine's 0.9 ms: the margin is bounded.
        assert_eq!(s.margin(), SPIN_NS);
    }
}
