// Sine and cosine to ~1e-7 absolute for RoPE angles up to ~2e5 rad (shared by the RoPE kernels).

// pi/2 = C1 + C2 + C3 + C4 (to ~5e-15). C1..C3 have 7 significant bits, so k * Ci is exact
// for |k| < 2^17 and each subtraction below loses nothing (Cody-Waite reduction).
const C1: f32 = 1.5625;
const C2: f32 = 0.0081787109375;
const C3: f32 = 0.00011730194091796875;
const C4: f32 = 3.1391647e-07;

// (sin x, cos x): x = k*pi/2 + r with |r| <= ~pi/4, Taylor polynomials in r (truncation
// < 1e-11 there), then the quadrant k mod 4.
fn sin_cos(x: f32) -> vec2<f32> {
    let k = round(x * 0.63661975);
    var r = x - k * C1;
    r = r - k * C2;
    r = r - k * C3;
    r = r - k * C4;
    let r2 = r * r;
    let ps = -1.0 / 6.0 + r2 * (1.0 / 120.0 + r2 * (-1.0 / 5040.0 + r2 * (1.0 / 362880.0 + r2 * (-1.0 / 39916800.0))));
    let pc = -0.5 + r2 * (1.0 / 24.0 + r2 * (-1.0 / 720.0 + r2 * (1.0 / 40320.0 + r2 * (-1.0 / 3628800.0 + r2 * (1.0 / 479001600.0)))));
    let s = r + r * r2 * ps;
    let c = 1.0 + r2 * pc;
    switch (i32(k) & 3) {
        case 0: { return vec2<f32>(s, c); }
        case 1: { return vec2<f32>(c, -s); }
        case 2: { return vec2<f32>(-s, -c); }
        default: { return vec2<f32>(-c, s); }
    }
}
