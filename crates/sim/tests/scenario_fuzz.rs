//! Scenario files from the field are hand-written: mangled versions of the built-in scenarios (bytes
//! replaced, lines dropped or repeated, numbers changed) must load or be refused with an error naming the
//! file and line — never panic, and one that loads runs. Deterministic: the mutations come from a fixed
//! seed.

use tclab_sim::builtin::BUILTIN;
use tclab_sim::rng::Rng;
use tclab_sim::scenario::load;

const NASTY: &[&str] = &[
    "0",
    "-1",
    "1e30",
    "\"\"",
    "\"-5mbit\"",
    "\"0bit\"",
    "\"1ns\"",
    "65536",
    "4294967296",
    "\"a:b:c\"",
    "[]",
    "{}",
    "true",
    "\"nan\"",
    "\"9999999999999999999s\"",
    "\"1tbit\"",
    "\"\u{0}\"",
    "\"r:eth9\"",
];

fn mutate(text: &str, r: &mut Rng) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for _ in 0..1 + r.below(3) {
        if lines.is_empty() {
            break;
        }
        let i = r.below(lines.len() as u64) as usize;
        match r.below(5) {
            0 => {
                lines.remove(i);
            }
            1 => {
                let l = lines[i].clone();
                lines.insert(i, l);
            }
            2 => {
                // Replace a value with something hostile.
                if let Some((k, _)) = lines[i].split_once('=') {
                    let v = NASTY[r.below(NASTY.len() as u64) as usize];
                    lines[i] = format!("{k}= {v}");
                }
            }
            3 => {
                // Flip a byte (kept valid UTF-8 by choosing ASCII).
                let mut b = lines[i].clone().into_bytes();
                if !b.is_empty() {
                    let j = r.below(b.len() as u64) as usize;
                    let pool = b" =[]\"#:0x\\";
                    b[j] = pool[r.below(pool.len() as u64) as usize];
                }
                lines[i] = String::from_utf8(b).unwrap_or_default();
            }
            _ => {
                lines.truncate(i);
            }
        }
    }
    lines.join("\n") + "\n"
}

#[test]
fn mangled_scenarios_never_panic() {
    let mut r = Rng::stream(7, "scenario-fuzz");
    let mut refused = 0;
    let mut accepted = 0;
    for b in BUILTIN {
        let base = b.toml();
        // bench-isp's thousands of policy lines differ only in their numbers, and each run that loads is
        // a thousand TCP flows: 30 mutations of it cost what 300 of another scenario cost. bench-isp-10k
        // (30 000 policy lines, 10 000 flows) gets 3, run for 20 ms.
        let (tries, run_for) = match base.lines().count() {
            n if n > 10_000 => (3, 20_000_000),
            n if n > 1_000 => (30, 200_000_000),
            _ => (300, 200_000_000),
        };
        for _ in 0..tries {
            let text = mutate(&base, &mut r);
            match load("fuzz.toml", &text, std::path::Path::new(".")) {
                Ok(mut sc) => {
                    accepted += 1;
                    // Run one in ten that load, briefly: what validation let through must run too.
                    if accepted % 10 == 0 {
                        sc.duration = sc.duration.min(run_for);
                        tclab_sim::run::run(&mut sc, &mut |_| {})
                            .expect("an accepted scenario runs");
                    }
                }
                Err(e) => {
                    refused += 1;
                    assert!(e.line >= 1 && e.line <= text.lines().count() + 1, "{e}");
                    assert!(e.to_string().starts_with("fuzz.toml:"), "{e}");
                }
            }
        }
    }
    assert!(
        refused > 100 && accepted > 100,
        "both outcomes exercised: {refused} refused, {accepted} accepted"
    );
}
