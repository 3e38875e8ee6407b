// Quantized matrix multiply on cooperative matrices (tensor cores), y[t, r] = Σ_c w[r, c] · x[t, c],
// for prefill. Same parameters and bindings as matmul.wgsl (plain mode only, no experts).
// Composed after a header (`enable f16; enable wgpu_cooperative_matrix;`, SGN), a weight
// type's shaders/quant files (`dq4`) and matmul_params.wgsl.
//
// A workgroup computes 64 tokens x (32 · SGN) rows with 2 · SGN subgroups of 32 invocations,
// each owning a 32 x 32 block as 2 x 2 fragments of 16 x 16 (f16 inputs, f32 accumulators).
// Per 32 columns, x and the dequantized weights are staged in workgroup memory as f16.
//
// f32 accuracy from f16 inputs: each value v is split into hi (v to f16's precision) and
// lo = f16((v - hi) · 2^11); hi·hi goes to one accumulator and lo·hi + hi·lo to another,
// y = acc_hi + acc_lo · 2^-11 (the lo·lo term is below f32 rounding). The result matches
// the f32 kernels to ~2^-22 relative per product instead of f16's 2^-11. Scaling lo up
// keeps it clear of f16 subnormals, which the device may flush to zero. x is scaled by 2^-4 and weights by 2^4
// (the product is unchanged) to keep |x| up to ~1e6 inside f16's range and small weights
// out of the subnormals.
//
// naga 30 writes coopStore before its operands unless they are already evaluated: every
// coopStore argument is a `let` made before an ordinary assignment (`flush`), which makes
// naga emit them first.

const BM: u32 = 64u;
const BN: u32 = 32u * SGN;
const BK: u32 = 32u;
const WG: u32 = 64u * SGN;
const XS: f32 = 0.0625;
const WS: f32 = 16.0;
const LS: f32 = 2048.0;
// Row stride of the staged tiles: BK plus a pad, so the 16 rows a fragment load reads
// start in different memory banks.
const SK: u32 = BK + 8u;
// vec4s staged per invocation and step (x and weights).
const TV: u32 = (BM + BN) * BK / 4u / WG;
// Staged tiles, hi and lo parts: rows 0..BM are x (token, column), rows BM.. the weights
// (one row of BK per output row), which start at WROW.
const WROW: u32 = BM * SK;

var<workgroup> t_hi: array<f16, (BM + BN) * SK>;
var<workgroup> t_lo: array<f16, (BM + BN) * SK>;
// One 16 x 16 fragment per subgroup, hi and lo accumulators.
var<workgroup> out_h: array<f32, 2u * SGN * 256u>;
var<workgroup> out_l: array<f32, 2u * SGN * 256u>;

// The hi and lo parts of each element of v (see above). hi is v with its significand cut
// to f16's 10 bits by a mask, not a round trip through f16: a device compiler may fold
// f32(f16(v)) back to v (an H100's does), which left lo at zero. Below f16's smallest
// normal hi is 0 and lo carries v.
struct Split {
    hi: vec4<f16>,
    lo: vec4<f16>,
}

fn split(v: vec4<f32>) -> Split {
    let cut = bitcast<vec4<f32>>(bitcast<vec4<u32>>(v) & vec4<u32>(0xFFFFE000u));
    let h = select(cut, vec4<f32>(0.0), abs(v) < vec4<f32>(6.103515625e-5));
    return Split(vec4<f16>(h), vec4<f16>((v - h) * LS));
}

// Staging slot `v` (a vec4 of tile row v / 8) at columns k0..: x at tokens t0.. (tokens
// past n are zero), then the weights at rows r0.. (rows past the end repeat the last;
// their results are not written).
fn fetch(v: u32, t0: u32, r0: u32, k0: u32) -> vec4<f32> {
    let i = v / (BK / 4u);
    let c4 = k0 / 4u + v % (BK / 4u);
    if (i < BM) {
        if (t0 + i >= p.n) {
            return vec4<f32>(0.0);
        }
        return x[p.x_off4 + (t0 + i) * p.x_stride4 + c4] * XS;
    }
    let rb = (p.w_row0 + min(r0 + i - BM, p.rows - 1u)) * p.row_bytes;
    return dq4(rb, c4) * WS;
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_id) sg: u32,
    @builtin(subgroup_invocation_id) lane: u32,
) {
    let lin = wg.x + wg.y * p.groups_x;
    if (lin >= p.row_groups * ((p.n + BM - 1u) / BM)) {
        return;
    }
    let r0 = (lin % p.row_groups) * BN;
    let t0 = (lin / p.row_groups) * BM;
    let tm = sg / SGN; // which 32 tokens of the 64
    let tn = sg % SGN; // which 32 rows

    var acc00 = coop_mat16x16<f32, C>();
    var acc01 = coop_mat16x16<f32, C>();
    var acc10 = coop_mat16x16<f32, C>();
    var acc11 = coop_mat16x16<f32, C>();
    var lo00 = coop_mat16x16<f32, C>();
    var lo01 = coop_mat16x16<f32, C>();
    var lo10 = coop_mat16x16<f32, C>();
    var lo11 = coop_mat16x16<f32, C>();
    // Each invocation stages TV vec4s per step (x's slots first, then the weights'),
    // fetched into registers one step ahead so their loads overlap the previous step's
    // products.
    var r: array<vec4<f32>, TV>;
    let cols = p.cols4 * 4u;
    for (var s = 0u; s < TV; s++) {
        r[s] = fetch(lid + s * WG, t0, r0, 0u);
    }
    for (var k0 = 0u; k0 < cols; k0 += BK) {
        for (var s = 0u; s < TV; s++) {
            let v = lid + s * WG;
            let sp = split(r[s]);
            let at = (v / (BK / 4u)) * SK + 4u * (v % (BK / 4u));
            for (var e = 0u; e < 4u; e++) {
                t_hi[at + e] = sp.hi[e];
                t_lo[at + e] = sp.lo[e];
            }
        }
        workgroupBarrier();
        if (k0 + BK < cols) {
            for (var s = 0u; s < TV; s++) {
                r[s] = fetch(lid + s * WG, t0, r0, k0 + BK);
            }
        }
        for (var kk = 0u; kk < BK; kk += 16u) {
            let ia = tm * 32u * SK + kk;
            let ib = WROW + tn * 32u * SK + kk;
            let a0h = coopLoadT<coop_mat16x16<f16, A>>(&t_hi[ia], SK);
            let a1h = coopLoadT<coop_mat16x16<f16, A>>(&t_hi[ia + 16u * SK], SK);
            let a0l = coopLoadT<coop_mat16x16<f16, A>>(&t_lo[ia], SK);
            let a1l = coopLoadT<coop_mat16x16<f16, A>>(&t_lo[ia + 16u * SK], SK);
            // B = W^T: element (k, r) sits at r * SK + k, column-major with stride SK.
            let b0h = coopLoad<coop_mat16x16<f16, B>>(&t_hi[ib], SK);
            let b1h = coopLoad<coop_mat16x16<f16, B>>(&t_hi[ib + 16u * SK], SK);
            let b0l = coopLoad<coop_mat16x16<f16, B>>(&t_lo[ib], SK);
            let b1l = coopLoad<coop_mat16x16<f16, B>>(&t_lo[ib + 16u * SK], SK);
            acc00 = coopMultiplyAdd(a0h, b0h, acc00);
            acc01 = coopMultiplyAdd(a0h, b1h, acc01);
            acc10 = coopMultiplyAdd(a1h, b0h, acc10);
            acc11 = coopMultiplyAdd(a1h, b1h, acc11);
            lo00 = coopMultiplyAdd(a0l, b0h, coopMultiplyAdd(a0h, b0l, lo00));
            lo01 = coopMultiplyAdd(a0l, b1h, coopMultiplyAdd(a0h, b1l, lo01));
            lo10 = coopMultiplyAdd(a1l, b0h, coopMultiplyAdd(a1h, b0l, lo10));
            lo11 = coopMultiplyAdd(a1l, b1h, coopMultiplyAdd(a1h, b1l, lo11));
        }
        workgroupBarrier();
    }

    // Each fragment goes through this subgroup's 16 x 16 slot of workgroup memory, from
    // which its lanes write the rows and tokens that exist.
    var flush = 0u;
    let slot = sg * 256u;
    for (var f = 0u; f < 4u; f++) {
        var fh = acc00;
        var fl = lo00;
        if (f == 1u) {
            fh = acc01;
            fl = lo01;
        } else if (f == 2u) {
            fh = acc10;
            fl = lo10;
        } else if (f == 3u) {
            fh = acc11;
            fl = lo11;
        }
        let oh = fh;
        let ol = fl;
        let stride = 16u;
        flush = slot;
        coopStoreT(oh, &out_h[slot], stride);
        coopStoreT(ol, &out_l[slot], stride);
        workgroupBarrier();
        for (var e = lane; e < 256u; e += 32u) {
            let t = t0 + tm * 32u + (f / 2u) * 16u + e / 16u;
            let r = r0 + tn * 32u + (f % 2u) * 16u + e % 16u;
            if (t < p.n && r < p.rows) {
                y[p.y_off + t * p.y_stride + p.row0 + r] = out_h[slot + e] + out_l[slot + e] * (1.0 / LS);
            }
        }
        workgroupBarrier();
    }
}
