// matmul_coop.wgsl's w from split_f16.wgsl's parts, already in the staging order: this
// step's BN x 8 vec4s of each part lie contiguous from w0, and the workgroup copies them
// slot by slot (slot i = lid + s · WG: staged row i / 8, vec4 column i % 8).
@group(0) @binding(3) var<storage, read> wh: array<vec4<f16>>;
@group(0) @binding(4) var<storage, read> wl: array<vec4<f16>>;

fn stage_w(lid: u32, w0: u32, rb: u32, c0: u32) {
    for (var s = 0u; s < WV; s++) {
        let i = lid + s * WG;
        let at = (BM + i / 8u) * SKV + i % 8u;
        s_hi[at] = wh[w0 + i];
        if (LO) {
            s_lo[at] = wl[w0 + i];
        }
    }
}

// Vec4 i of each part, for matmul_coop.wgsl's OVERLAP staging.
fn w_hi_at(i: u32) -> vec4<f16> {
    return wh[i];
}

fn w_lo_at(i: u32) -> vec4<f16> {
    return wl[i];
}
