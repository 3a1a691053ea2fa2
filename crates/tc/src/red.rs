//! RED's parameters as tc computes them (iproute2's `tc_red.c`): Wlog from the burst, Plog from the
//! probability. Used by sfq's RED options (and red, choke, gred).

/// `TC_RED_ECN`, `TC_RED_HARDDROP`.
pub const TC_RED_ECN: u8 = 1;

pub const TC_RED_HARDDROP: u8 = 2;

/// `tc_red_eval_ewma`: the smallest Wlog for which `burst` packets of `avpkt` fit below `qmin`.
pub fn red_eval_ewma(qmin: u32, burst: u32, avpkt: u32) -> Option<u8> {
    let a = burst as f64 + 1.0 - qmin as f64 / avpkt as f64;
    if a < 1.0 {
        return None;
    }
    let mut w = 0.5f64;
    for wlog in 1..32u8 {
        if a <= (1.0 - (1.0 - w).powi(burst as i32)) / w {
            return Some(wlog);
        }
        w /= 2.0;
    }
    None
}

/// [`red_eval_ewma`] with tc's failure as `who` (RED, CHOKE, GRED, SFQ) reports it, after the hint
/// `tc_red_eval_ewma` itself prints when `burst` cannot even hold `qmin`.
pub fn eval_ewma(qmin: u32, burst: u32, avpkt: u32, who: &str) -> crate::Result<u8> {
    red_eval_ewma(qmin, burst, avpkt).ok_or_else(|| {
        let mut msg = String::new();
        if (burst as f64) + 1.0 - (qmin as f64) / (avpkt as f64) < 1.0 {
            msg = format!(
                "tc_red_eval_ewma() burst {burst} is too small ? Try burst {}\n",
                1 + qmin / avpkt
            );
        }
        crate::Failure::options(format!("{msg}{who}: failed to calculate EWMA constant."))
    })
}

/// `tc_red_eval_P`.
pub fn red_eval_p(qmin: u32, qmax: u32, prob: f64) -> Option<u8> {
    let i = qmax as i64 - qmin as i64;
    if i == 0 {
        return Some(0);
    }
    if i < 0 {
        return None;
    }
    let mut prob = prob / i as f64;
    for i in 0..32u8 {
        if prob > 1.0 {
            return Some(i);
        }
        prob *= 2.0;
    }
    None
}
