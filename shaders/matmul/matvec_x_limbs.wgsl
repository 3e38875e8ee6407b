// The staged input of matvec.wgsl as integers, for the chunk dot products that multiply
// by integer dot products (dot4U8Packed / dot4I8Packed: four byte products and their sum
// in one instruction, against a conversion and a multiply-add per element in f32).
// Composed into every matvec, used where the header's XN is set (a multiple of 16).
//
// x is cut into runs of 16 elements. A run holds X_i = round(x_i · 2^k) with 2^k the
// power of two that puts the run's largest |x_i| in [2^21, 2^22): the error is at most
// 2^-22 of that largest element (f32's own rounding is 2^-24 of each). X_i is stored as
// three bytes, X = L0 + 2^8 L1 + 2^16 L2 (L0, L1 unsigned, L2 signed, |L2| <= 64), each
// limb four elements to a word, and a dot product with quants q is
// Σq·L0 + 2^8 Σq·L1 + 2^16 Σq·L2, exact in i32 (over a run for four-bit quants, a word for six-bit ones). Beside the
// limbs: each word's sum of X (the K-quants' min term, Q6_K's offset of 32) and each
// run's unit 2^-k.
//
// The prologue (or stage_input, without one) stages a word per invocation and step: the
// four invocations of a run share its largest element (run_max4, matvec_reduce_*.wgsl).
// Staging each run by one invocation after the f32 staging took a barrier and a pass of
// its own (H100, E2B's folded Q4_K matvecs: 12.9 / 22.1 us against 10.0 / 20.5 in f32,
// 9.3 / 16.8 with no staging at all); this way they take 9.9 / 18.3.

// XN: the length of the input staged as integers (the header's; 0 where the chunk dot
// products take f32). One word and run where it is 0, so those kernels reserve (almost)
// no workgroup memory for it.
const IDOT: bool = XN > 0u;
const XW: u32 = max(XN / 4u, 1u);
const XR: u32 = max(XN / 16u, 1u);
// Per word (at word_slot): its limbs L0, L1, L2 and the sum of its four X (as i32 bits).
var<workgroup> xw: array<vec4<u32>, XW>;
// Per run: its unit 2^-k.
var<workgroup> xunit: array<f32, XR>;

// Where word wd (word wd % 4 of run wd / 4) is stored. The eight invocations of a 16-byte
// load phase read word i of runs 0, 1, 4, 5, 8, 9, 12, 13 of a block (Q4_K's low halves;
// + 2 for the high), all words of two neighbouring runs (Q6_K's 16-element chunks) or
// words 0, 4, 32, 36, 64, 68, 96, 100 (+ 8k + i) (its 64-element chunks): XOR-ing bits
// 4-5 and 6 of wd into its place in its run gives each of them a bank group of its own.
fn word_slot(wd: u32) -> u32 {
    return wd ^ ((wd >> 4u) & 3u) ^ ((wd >> 6u) & 1u);
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
    if (q < XW) {
        let sum = (xq.x + xq.y) + (xq.z + xq.w);
        let l1 = pack4xI8(xq >> vec4<u32>(8u));
        xw[word_slot(q)] = vec4<u32>(pack4xI8(xq), l1, pack4xI8(xq >> vec4<u32>(16u)), bitcast<u32>(sum));
        if (q % 4u == 0u) {
            xunit[q / 4u] = bitcast<f32>(u32(127 - k) << 23u);
        }
    }
}

// Without a prologue (RN = 0): every workgroup stages x from element x_off.
const XKEEP: u32 = (XW + WG - 1u) / WG;

fn stage_input(lid: u32) {
    for (var j = 0u; j < XKEEP; j++) {
        let q = lid + j * WG;
        stage_word(q, x[p.x_off4 + min(q, XW - 1u)], lid);
    }
    workgroupBarrier();
}

// Σ q_i · X_i · 2^-k over run r (q_i < 16, its elements' quants, a byte each), and
// Σ X_i · 2^-k.
fn run_idot(q: vec4<u32>, r: u32) -> vec2<f32> {
    var u = 0u;
    var h = 0u;
    var t = 0;
    var s = 0;
    for (var i = 0u; i < 4u; i++) {
        let v = xw[word_slot(4u * r + i)];
        u += dot4U8Packed(q[i], v.x);
        h += dot4U8Packed(q[i], v.y);
        t += dot4I8Packed(q[i], v.z);
        s += bitcast<i32>(v.w);
    }
    return vec2<f32>(f32(i32(u + (h << 8u)) + (t << 16u)), f32(s)) * xunit[r];
}

// Σ (q_i - o) · X_i over word wd (q_i < 128, a byte each), in units of its run's 2^-k
// (|Σ| < 2^31 for o <= 64).
fn word_idot(q: u32, wd: u32, o: i32) -> i32 {
    let v = xw[word_slot(wd)];
    let low = dot4U8Packed(q, v.x) + (dot4U8Packed(q, v.y) << 8u);
    let d = i32(low) + (dot4I8Packed(q, v.z) << 16u);
    return d - o * bitcast<i32>(v.w);
}
