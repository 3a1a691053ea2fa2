//! A progress bar on stderr for the long jobs: a `tclab sim` run (in simulated seconds) and a
//! `tclab trace` read (in bytes of the file). It appears only once a job has taken [`AFTER`] of wall
//! time, and only when stderr is a terminal: pipes, CI logs and output files never see it, so every
//! output stays the same byte for byte. When the job ends the bar is erased.
//!
//! Written by hand rather than with indicatif: one bar, redrawn from the job's own loop at most ten
//! times a second, needs no draw thread, no terminal-width crate and no templates. The wall clock is
//! read here only; the simulator reports the virtual time it has reached and knows no clock.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// How long a job runs before its bar appears.
pub const AFTER: Duration = Duration::from_secs(2);

/// What a bar counts.
#[derive(Clone, Copy)]
pub enum Unit {
    /// Virtual nanoseconds of a simulation.
    SimNanos,
    /// Bytes of a file read.
    Bytes,
}

pub struct Progress {
    started: Instant,
    /// The amount at the end, if known (a trace on stdin has none).
    total: Option<u64>,
    unit: Unit,
    enabled: bool,
    /// Whether a bar is on the screen, to be erased.
    shown: bool,
    /// Wall-clock milliseconds of the last redraw.
    last_ms: u128,
}

impl Progress {
    /// A bar for a job that counts `unit` up to `total`, on stderr if it is a terminal.
    pub fn new(total: Option<u64>, unit: Unit) -> Progress {
        Progress::to(total, unit, std::io::stderr().is_terminal())
    }

    fn to(total: Option<u64>, unit: Unit, enabled: bool) -> Progress {
        Progress {
            started: Instant::now(),
            total,
            unit,
            enabled,
            shown: false,
            last_ms: 0,
        }
    }

    /// The job has reached `done`. Cheap when the bar is off; a caller with a hot loop still calls it
    /// every few thousand items, not every item, to keep the clock out of the loop.
    pub fn tick(&mut self, done: u64) {
        if !self.enabled {
            return;
        }
        let ms = self.started.elapsed().as_millis();
        if ms < AFTER.as_millis() || ms < self.last_ms + 100 {
            return;
        }
        self.last_ms = ms;
        let line = self.render(done, ms as f64 / 1e3);
        // `\r` and erase-to-end: the line is redrawn in place, and a shorter one leaves nothing behind.
        let mut e = std::io::stderr().lock();
        let _ = write!(e, "\r{line}\x1b[K");
        let _ = e.flush();
        self.shown = true;
    }

    /// The bar's text for `done` after `secs` of wall time.
    fn render(&self, done: u64, secs: f64) -> String {
        let (num, what) = match self.unit {
            Unit::SimNanos => (
                format!(
                    "{:.1}/{} s simulated",
                    done as f64 / 1e9,
                    self.total
                        .map_or("?".into(), |t| format!("{:.1}", t as f64 / 1e9))
                ),
                "",
            ),
            Unit::Bytes => (
                format!(
                    "{}/{} MB",
                    done / 1_000_000,
                    self.total
                        .map_or("?".into(), |t| (t / 1_000_000).to_string())
                ),
                " read",
            ),
        };
        match self.total.filter(|&t| t > 0) {
            Some(t) => {
                let frac = (done as f64 / t as f64).clamp(0.0, 1.0);
                let width = 30;
                let full = (frac * width as f64) as usize;
                format!(
                    "[{}{}] {:>3.0}%  {num}{what}  {secs:.0} s",
                    "=".repeat(full),
                    " ".repeat(width - full),
                    frac * 100.0
                )
            }
            None => format!("{num}{what}  {secs:.0} s"),
        }
    }

    /// Erase the bar, if one was drawn.
    pub fn finish(&mut self) {
        if self.shown {
            let mut e = std::io::stderr().lock();
            let _ = write!(e, "\r\x1b[K");
            let _ = e.flush();
            self.shown = false;
        }
    }
}

impl Drop for Progress {
    /// A job that ends in an error erases its bar too, before the error is printed.
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_shows_the_share_done() {
        let p = Progress::to(Some(30_000_000_000), Unit::SimNanos, false);
        assert_eq!(
            p.render(15_000_000_000, 3.2),
            "[===============               ]  50%  15.0/30.0 s simulated  3 s"
        );
        let p = Progress::to(Some(410_000_000), Unit::Bytes, false);
        assert_eq!(
            p.render(410_000_000, 9.6),
            "[==============================] 100%  410/410 MB read  10 s"
        );
        // Past the end (a file that grew while read) the bar stays full.
        assert!(p
            .render(500_000_000, 1.0)
            .starts_with("[==============================] 100%"));
        // No total (stdin): the amount alone.
        let p = Progress::to(None, Unit::Bytes, false);
        assert_eq!(p.render(12_345_678, 2.0), "12/? MB read  2 s");
    }

    #[test]
    fn a_bar_off_draws_nothing() {
        // Not a terminal: ticks past the delay neither draw nor mark anything to erase.
        let mut p = Progress::to(Some(10), Unit::Bytes, false);
        if let Some(t) = p.started.checked_sub(AFTER * 2) {
            p.started = t;
        }
        p.tick(5);
        assert!(!p.shown);
        let mut p = Progress::to(Some(10), Unit::Bytes, true);
        p.tick(5);
        assert!(!p.shown, "not within the first {AFTER:?}");
    }
}
