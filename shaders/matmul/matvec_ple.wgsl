// Gemma 4's per-layer-embedding gate for one token (decode) without a dispatch of its own,
// composed into matvec.wgsl (header: PLE_ACC or PLE_GATE, PD = the gate's width, PH = the
// hidden size). A layer ends with
//   h2 = h + RMS(d) ⊙ w_post,  d = W_down · a,   g = gelu_tanh(W_gate · h2) ⊙ e,   u = W_proj · g
// and W_gate · h2 = H + rms(d)^-1 · D with H = Σ_r W_gate[:, r] · h[r] and D = Σ_r
// W_gate[:, r] · w_post[r] · d[r], sums over the hidden rows r that the down projection's
// workgroups own. So:
// - PLE_ACC (the down projection): each workgroup adds its rows' terms of H and D (from
//   Gt = W_gateᵀ in f32, made at load) into accumulators with atomic adds, after its rows;
// - PLE_GATE (the per-layer projection W_proj): every workgroup reads the sums, reduces
//   rms(d) from d and makes g as its input; its first workgroup also stores h2.
// The gate's matvec and its dispatch leave the chain (H200, E2B decode +6%:
// docs/performance-log.md, fifty-fourth session).
//
// The sums are 64-bit fixed point (FX = 2^32 per unit, |sum| < 2^31): integer adds give
// the same result in any order, so decode stays reproducible. A term is clamped to ±1e9
// and rounded to 2^-32, so a sum of n terms is within n · 2^-33 of the f32 terms' exact
// sum. COPIES copies, taken by workgroup index, keep the adds to any one address few
// (one copy measured 9% slower than eight on an H200); the reader adds the copies.
// Layout from p.acc_off (in i64s): COPIES × [H (PD) | D (PD)].
//
// Bindings, PLE_ACC: other = Gt (PH × PD), ra = h, w_post; PLE_GATE: other = e (from
// p.other_off), ra = d, x = h (as vec4s), w_post, x_out = h2 (from p.xout_off).

@group(0) @binding(12) var<storage, read_write> ple_acc: array<atomic<i64>>;

const COPIES: u32 = 8u;
const FX: f32 = 4294967296.0;
const FX_INV: f32 = 2.3283064365386963e-10;

// PLE_ACC: each row's Gt entry for this invocation's gate index, h and w_post (loaded
// before the matvec, so their trip overlaps it), and the rows' d with a 1 where the row
// exists (rows past the end compute the last row again).
var<private> ple_gt: array<f32, ROWS>;
var<private> ple_hw: array<vec2<f32>, ROWS>;
var<workgroup> ple_d: array<vec2<f32>, ROWS>;
// PLE_GATE: g, the projection's input.
var<workgroup> ple_g: array<vec4<f32>, PD / 4u>;

fn to_fx(v: f32) -> i64 {
    return i64(round(clamp(v, -1e9, 1e9) * FX));
}

fn ple_preload(lin: u32, lid: u32) {
    if (!PLE_ACC) {
        return;
    }
    let j = min(lid, PD - 1u);
    for (var i = 0u; i < ROWS; i++) {
        let r = p.row0 + min(lin * ROWS + i, p.rows - 1u);
        ple_gt[i] = other[r * PD + j];
        ple_hw[i] = vec2<f32>(ra[r], w_post[r]);
    }
}

// Row `row`'s result v, in its lane 0.
fn ple_row(lid: u32, lane: u32, row: u32, v: f32) {
    if (PLE_ACC && lane == 0u) {
        ple_d[lid / TPR] = select(vec2<f32>(0.0), vec2<f32>(v, 1.0), row < p.rows);
    }
}

fn ple_accumulate(lin: u32, lid: u32) {
    if (!PLE_ACC) {
        return;
    }
    workgroupBarrier();
    var sh = 0.0;
    var sd = 0.0;
    for (var i = 0u; i < ROWS; i++) {
        let dv = ple_d[i];
        sh += ple_gt[i] * ple_hw[i].x * dv.y;
        sd += ple_gt[i] * ple_hw[i].y * dv.x;
    }
    if (lid < PD) {
        let base = p.acc_off + (lin % COPIES) * 2u * PD;
        atomicAdd(&ple_acc[base + lid], to_fx(sh));
        atomicAdd(&ple_acc[base + PD + lid], to_fx(sd));
    }
}

const PH4: u32 = PH / 4u;
const PHK: u32 = (PH4 + WG - 1u) / WG;

fn ple_gate(lin: u32, lid: u32) {
    // Every load first (the first workgroup's h and w_post too): one wait on memory. The
    // projection's weights were loaded before (PRELOAD).
    var dv: array<vec4<f32>, PHK>;
    var hv: array<vec4<f32>, PHK>;
    var wv: array<vec4<f32>, PHK>;
    var ss = 0.0;
    for (var k = 0u; k < PHK; k++) {
        let q = min(lid + k * WG, PH4 - 1u);
        let i = 4u * q;
        dv[k] = vec4<f32>(ra[i], ra[i + 1u], ra[i + 2u], ra[i + 3u]);
        if (lin == 0u) {
            hv[k] = x[q];
            wv[k] = vec4<f32>(w_post[i], w_post[i + 1u], w_post[i + 2u], w_post[i + 3u]);
        }
        ss += select(0.0, dot(dv[k], dv[k]), lid + k * WG < PH4);
    }
    let j = min(lid, PD - 1u);
    var hs = i64(0);
    var ds = i64(0);
    for (var c = 0u; c < COPIES; c++) {
        let base = p.acc_off + c * 2u * PD;
        hs += atomicLoad(&ple_acc[base + j]);
        ds += atomicLoad(&ple_acc[base + PD + j]);
    }
    let e = other[p.other_off + j];
    let r = inverseSqrt(wg_sum(ss, lid) / f32(PH) + p.eps);
    if (lid < PD) {
        ple_g[lid / 4u][lid % 4u] = gelu_tanh(f32(hs) * FX_INV + r * (f32(ds) * FX_INV)) * e;
    }
    if (lin == 0u) {
        // h2 = h + RMS(d) ⊙ w_post, in the residual step's order (matvec.wgsl's prologue).
        for (var k = 0u; k < PHK; k++) {
            let q = lid + k * WG;
            if (q < PH4) {
                var t = dv[k] * r;
                t *= wv[k];
                let v = hv[k] + t;
                let o = p.xout_off + 4u * q;
                x_out[o] = v.x;
                x_out[o + 1u] = v.y;
                x_out[o + 2u] = v.z;
                x_out[o + 3u] = v.w;
            }
        }
    }
    workgroupBarrier();
}

fn ple_x(i: u32) -> vec4<f32> {
    return ple_g[i];
}
