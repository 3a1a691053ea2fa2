//! The PNGs' lines wider than a pixel, rasterised here rather than by plotters' bitmap backend.
//!
//! plotters-backend 0.3.7 fills a wide path as one polygon whose corners are mitre joins
//! (`rasterizer::polygonize`), and caps only the mitre on the outer side of a turn. At a sharp turn — a
//! queue sampled as 0, 1514, 0 bytes in consecutive samples draws a spike a pixel or two wide — the
//! inner corner's mitre point lies hundreds of pixels beyond the line: backlog.png showed spikes to
//! 4.5 kB of a queue that never held more than 3 kB after start-up, and lines down through the x
//! axis's labels to the image's bottom. Here a line is the set of pixels within half its width of one
//! of its segments (butt ends, as plotters draws them) or of a vertex inside it (round joins), inside
//! the plotting area only: no pixel lies further than half the width from the data. SVG lines stay
//! plotters' `<polyline>`: the viewer joins those (its mitre limit bounds the corners).

use super::Rect;

/// The pixels (x, y) of the polyline `path` (pixel coordinates, a pixel's centre at its integer
/// coordinates as plotters' one-pixel lines have it) drawn `width` pixels wide with the dash pattern
/// `dash` (drawn, skipped: pixels along the line; `None` solid), that lie in `clip`, each with its
/// coverage (0 to 1: the edges are anti-aliased, as plotters' polygons are). Each pixel once, row by
/// row.
pub fn pixels(
    path: &[(f64, f64)],
    width: u32,
    dash: Option<(f64, f64)>,
    clip: Rect,
) -> Vec<((i32, i32), f64)> {
    if clip.w <= 0 || clip.h <= 0 {
        return Vec::new();
    }
    let mut cov = vec![0.0f64; clip.w as usize * clip.h as usize];
    let r = width as f64 / 2.0;
    for piece in dashes(path, dash) {
        cover(&piece, r, clip, &mut cov);
    }
    cov.iter()
        .enumerate()
        .filter(|(_, &c)| c > 0.0)
        .map(|(i, &c)| {
            let at = (
                clip.x + (i % clip.w as usize) as i32,
                clip.y + (i / clip.w as usize) as i32,
            );
            (at, c)
        })
        .collect()
}

/// The drawn pieces of `path`: the whole of it when solid; else, walking it from its start, `on`
/// pixels drawn and `off` skipped in turn (plotters' `DashedPathElement` walks it the same way).
fn dashes(path: &[(f64, f64)], dash: Option<(f64, f64)>) -> Vec<Vec<(f64, f64)>> {
    let Some((on, off)) = dash.filter(|&(on, off)| on > 0.0 && off > 0.0) else {
        return vec![path.to_vec()];
    };
    let mut pieces = Vec::new();
    let (mut drawing, mut left) = (true, on);
    let mut piece: Vec<(f64, f64)> = path.first().copied().into_iter().collect();
    for w in path.windows(2) {
        let (mut a, b) = (w[0], w[1]);
        let mut d = (b.0 - a.0).hypot(b.1 - a.1);
        while d >= left {
            let t = left / d;
            a = (a.0 + (b.0 - a.0) * t, a.1 + (b.1 - a.1) * t);
            d -= left;
            if drawing {
                piece.push(a);
                pieces.push(std::mem::take(&mut piece));
            } else {
                piece = vec![a];
            }
            drawing = !drawing;
            left = if drawing { on } else { off };
        }
        left -= d;
        if drawing {
            piece.push(b);
        }
    }
    if drawing && piece.len() > 1 {
        pieces.push(piece);
    }
    pieces
}

/// Raise in `cov` (the pixels of `clip`, row by row) the coverage of the pixels near `piece`: a
/// pixel's centre within `r` of a segment — between the perpendiculars at its ends — or of an inner
/// vertex is covered; the coverage falls to 0 over the next pixel out (a pixel's share of a straight
/// edge through it).
fn cover(piece: &[(f64, f64)], r: f64, clip: Rect, cov: &mut [f64]) {
    let edge = |outside: f64| (0.5 - outside).clamp(0.0, 1.0);
    let mut mark = |lo: (f64, f64), hi: (f64, f64), at: &dyn Fn(f64, f64) -> f64| {
        let x0 = ((lo.0 - r - 1.0).floor() as i32).max(clip.x);
        let x1 = ((hi.0 + r + 1.0).ceil() as i32).min(clip.right() - 1);
        let y0 = ((lo.1 - r - 1.0).floor() as i32).max(clip.y);
        let y1 = ((hi.1 + r + 1.0).ceil() as i32).min(clip.bottom() - 1);
        for y in y0..=y1 {
            let row = (y - clip.y) as usize * clip.w as usize;
            for x in x0..=x1 {
                let c = &mut cov[row + (x - clip.x) as usize];
                *c = c.max(at(x as f64, y as f64));
            }
        }
    };
    for w in piece.windows(2) {
        let (a, b) = (w[0], w[1]);
        let (dx, dy) = (b.0 - a.0, b.1 - a.1);
        let len = dx.hypot(dy);
        if len == 0.0 {
            continue;
        }
        let (ux, uy) = (dx / len, dy / len);
        let lo = (a.0.min(b.0), a.1.min(b.1));
        let hi = (a.0.max(b.0), a.1.max(b.1));
        mark(lo, hi, &|x, y| {
            let along = (x - a.0) * ux + (y - a.1) * uy;
            let across = ((x - a.0) * uy - (y - a.1) * ux).abs();
            // How far beyond an end and beside the line (negative: inside); the pixel on an end is
            // the line's, as plotters' are.
            let beyond = (-along).max(along - len);
            edge(beyond - 0.5).min(edge(across - r))
        });
    }
    for &v in piece.iter().skip(1).take(piece.len().saturating_sub(2)) {
        mark(v, v, &|x, y| edge((x - v.0).hypot(y - v.1) - r));
    }
}
