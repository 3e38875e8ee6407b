// matmul_coop.wgsl's w from the weight type's blocks (row 0 at byte p.w_byte0): each
// invocation takes 16 consecutive elements of one row (one sub-block's scales: the type's
// dq16), scales them by p.w_scale and splits them into hi and lo parts as split_f16.wgsl
// does. Binding 4 is unused.
// Row r of the tile's rows is source row r where it exists (below p.rows), or with
// p.w_pair_half = h > 0 split_f16.wgsl's pairs: blocks of 2h rows, the first h gate rows
// and then their up rows p.w_pair_off further on; rows past the last pair are zeros.
@group(0) @binding(3) var<storage, read> w: array<u32>;

const_assert WV == 4u;

fn stage_w(lid: u32, w0: u32, rb: u32, c0: u32) {
    let i = (lid / 2u) * 8u + (lid % 2u) * 4u;
    let row = rb + i / 8u;
    var src = row;
    var live = row < p.rows;
    let ph = p.w_pair_half;
    if (ph != 0u) {
        let pair = (row / (2u * ph)) * ph + row % ph;
        live = pair < p.rows;
        src = pair + select(0u, p.w_pair_off, row % (2u * ph) >= ph);
    }
    var v: array<vec4<f32>, 4>;
    if (live) {
        v = dq16(p.w_byte0 + src * p.w_row_bytes, c0 + i % 8u);
    }
    for (var j = 0u; j < 4u; j++) {
        let x = v[j] * p.w_scale;
        let h = hi_part(x);
        let at = (BM + i / 8u) * SKV + i % 8u + j;
        s_hi[at] = vec4<f16>(h);
        s_lo[at] = vec4<f16>((x - h) * LS);
    }
}
