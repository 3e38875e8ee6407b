// matmul_coop.wgsl's w from the weight type's blocks (row 0 at byte p.w_byte0): each
// invocation takes 16 consecutive elements of one row (one sub-block's scales: the type's
// dq16), scales them by p.w_scale and splits them into hi and lo parts as split_f16.wgsl
// does. Binding 4 is unused.
// Row r of the tile's rows is the source row split_f16.wgsl would put there (hi_lo.wgsl's
// split_row: p.rows rows, or pairs with p.w_pair_half > 0), or zeros.
@group(0) @binding(3) var<storage, read> w: array<u32>;

const_assert WV == 4u;

fn stage_w(lid: u32, w0: u32, rb: u32, c0: u32) {
    let i = (lid / 2u) * 8u + (lid % 2u) * 4u;
    let src = split_row(rb + i / 8u, p.rows, p.w_pair_half, p.w_pair_off);
    var v: array<vec4<f32>, 4>;
    if (src != NONE) {
        v = dq16(p.w_byte0 + src * p.w_row_bytes, c0 + i % 8u);
    }
    for (var j = 0u; j < 4u; j++) {
        let x = v[j] * p.w_scale;
        let h = hi_part(x);
        let at = (BM + i / 8u) * SKV + i % 8u + j;
        s_hi[at] = vec4<f16>(h);
        if (LO) {
            s_lo[at] = vec4<f16>((x - h) * LS);
        }
    }
}

// matmul_coop.wgsl's OVERLAP is off where weights are staged from blocks (gpu::matmul_coop
// sets it for split weights only): dequantizing a half-step ahead in the large tile, each
// row's dq16 by one invocation of two, made E2B prefill 22% slower than the split pass
// (H200, forty-fifth session). These only complete the interface.
const_assert !OVERLAP;

fn w_hi_at(i: u32) -> vec4<f16> {
    return vec4<f16>(0.0);
}

fn w_lo_at(i: u32) -> vec4<f16> {
    return vec4<f16>(0.0);
}
