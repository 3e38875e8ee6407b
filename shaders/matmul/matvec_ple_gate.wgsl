// The per-layer projection's part of the per-layer-embedding gate (matvec_ple.wgsl): its
// input, g, made from the sums by every workgroup; the first also stores h2. Bindings:
// other = e (from p.other_off), ra = d, x = h (as vec4s), w_post, x_out = h2 (from
// p.xout_off), and the sums (read-only: the dispatch before wrote them). Reading the sums
// is this kernel's largest cost beyond the plain projection's: with those loads left out
// (timing only) E2B decoded 2% faster on an H200, and the kernel took 9.5 µs with 16
// copies, 11.4 with 32 (the plain projection 6.5-7.5). Plain loads, not atomicLoad on a
// read-write binding: E2B decode 1.4-1.7% faster, alternated in one command on an H200.

@group(0) @binding(12) var<storage, read> ple_sums: array<i64>;

// g, the projection's input.
var<workgroup> ple_g: array<vec4<f32>, PD / 4u>;

const PH4: u32 = PH / 4u;
const PHK: u32 = (PH4 + WG - 1u) / WG;

fn ple_preload(lin: u32, lid: u32) {}

fn ple_row(lid: u32, lane: u32, row: u32, v: f32) {}

fn ple_accumulate(lin: u32, lid: u32) {}

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
        hs += ple_sums[base + j];
        ds += ple_sums[base + PD + j];
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
