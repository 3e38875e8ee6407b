// The staged input of matvec.wgsl as integers, for the chunk dot products that multiply
// by integer dot products (dot4U8Packed / dot4I8Packed: four byte products and their sum
// in one instruction, against a conversion and a multiply-add per element in f32).
// Composed into every matvec, used where IDOT is set (RN > 0, a multiple of 16).
//
// x is cut into runs of 16 elements. A run holds X_i = round(x_i · 2^k) with 2^k the
// power of two that puts the run's largest |x_i| in [2^21, 2^22): the error is at most
// 2^-22 of that largest element (f32's own rounding is 2^-24 of each). X_i is stored as three bytes,
// X = L0 + 2^8 L1 + 2^16 L2 (L0, L1 unsigned, L2 signed, |L2| <= 64), each limb four
// elements to a word, so a run's limbs are three vec4<u32>, and a dot product with
// four-bit quants q is Σq·L0 + 2^8 Σq·L1 + 2^16 Σq·L2 exactly (|Σ| < 2^31 over a run).
// Beside them: the run's unit 2^-k and its words' sums of X (the K-quants' min term).
//
// The prologue stages a word per invocation and step: the four invocations of a run share
// its largest element (run_max4, in matvec_reduce_*.wgsl). Staging each run by one
// invocation after the f32 staging took a barrier and a pass of its own (H100, E2B's
// folded Q4_K matvecs: 12.9 / 22.1 us against 10.0 / 20.5 in f32, 9.3 / 16.8 without it).

// One run where IDOT is off, so those kernels reserve (almost) no workgroup memory for it.
const XR: u32 = select(1u, RN / 16u, IDOT && RN >= 16u);
var<workgroup> xl0: array<vec4<u32>, XR>;
var<workgroup> xl1: array<vec4<u32>, XR>;
var<workgroup> xl2: array<vec4<u32>, XR>;
var<workgroup> xsum: array<vec4<i32>, XR>;
var<workgroup> xunit: array<f32, XR>;

// Where run r is stored. The eight invocations of a block's chunks (lanes 8i .. 8i+7, one
// 16-byte load phase) read runs 0, 1, 4, 5, 8, 9, 12, 13 of the block (or those + 2):
// flipping bit 1 of the slot when bit 3 of r is set puts them in eight different bank
// groups.
fn run_slot(r: u32) -> u32 {
    return r ^ ((r >> 2u) & 2u);
}

// Word q of the input (elements 4q .. 4q + 3, value v); q past the input stores nothing
// but still takes part in run_max4.
fn stage_word(q: u32, v: vec4<f32>, lid: u32) {
    let a = abs(v);
    let m = run_max4(max(max(a.x, a.y), max(a.z, a.w)), lid);
    // m < 2^(e - 126) for m's biased exponent e, so |v| · 2^(148 - e) < 2^22. Clamped so
    // that both 2^k and 2^-k are normal floats (a zero run takes k = 126).
    let k = clamp(148 - i32((bitcast<u32>(m) >> 23u) & 0xFFu), -126, 126);
    // Rounded to the nearest integer by adding 1.5 · 2^23 (exact: |v · 2^k| < 2^22).
    let y = v * bitcast<f32>(u32(127 + k) << 23u) + 12582912.0;
    let xq = bitcast<vec4<i32>>(y) - vec4<i32>(0x4B400000);
    if (q < RN4) {
        let s = run_slot(q / 4u);
        let c = q % 4u;
        xl0[s][c] = pack4xI8(xq);
        xl1[s][c] = pack4xI8(xq >> vec4<u32>(8u));
        xl2[s][c] = pack4xI8(xq >> vec4<u32>(16u));
        xsum[s][c] = (xq.x + xq.y) + (xq.z + xq.w);
        if (c == 0u) {
            xunit[s] = bitcast<f32>(u32(127 - k) << 23u);
        }
    }
}

// Σ q_i · X_i · 2^-k over run r (q_i its elements' four-bit quants, a byte each), and
// Σ X_i · 2^-k.
fn run_idot(q: vec4<u32>, r: u32) -> vec2<f32> {
    let s = run_slot(r);
    let a = xl0[s];
    let b = xl1[s];
    let c = xl2[s];
    var u = 0u;
    var h = 0u;
    var t = 0;
    for (var i = 0u; i < 4u; i++) {
        u += dot4U8Packed(q[i], a[i]);
        h += dot4U8Packed(q[i], b[i]);
        t += dot4I8Packed(q[i], c[i]);
    }
    let sum = xsum[s];
    let unit = xunit[s];
    return vec2<f32>(f32(i32(u + (h << 8u)) + (t << 16u)), f32((sum.x + sum.y) + (sum.z + sum.w))) * unit;
}
