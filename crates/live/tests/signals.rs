//! The signals that stop `tclab live` cleanly, each in this test's own process: the flag they set is
//! global, and a signal it does not catch ends the process (the test fails as a crash).

use std::sync::atomic::Ordering;
use tclab_live::sys;

/// SIGHUP (a closed terminal, a dropped SSH session) used to end the bridge at once, without its
/// summary, `--out`'s tc.txt and plots, or the removal of its control socket; it now asks the loop
/// to stop, as SIGINT and SIGTERM do.
#[test]
fn sighup_asks_the_loop_to_stop_as_sigint_and_sigterm_do() {
    sys::stop_on_signals();
    assert!(!sys::STOP.load(Ordering::SeqCst));
    for sig in [libc::SIGHUP, libc::SIGINT, libc::SIGTERM] {
        sys::STOP.store(false, Ordering::SeqCst);
        // SAFETY: raise(3) with a signal whose handler only stores to an atomic.
        assert_eq!(unsafe { libc::raise(sig) }, 0);
        assert!(sys::STOP.load(Ordering::SeqCst), "signal {sig} caught");
    }
}
