// matvec.wgsl's per-layer-embedding hooks where the kernel takes no part in the gate
// (matvec_ple.wgsl): nothing to do, and no binding 12.

fn ple_preload(lin: u32, lid: u32) {}

fn ple_row(lid: u32, lane: u32, row: u32, v: f32) {}

fn ple_accumulate(lin: u32, lid: u32) {}

fn ple_gate(lin: u32, lid: u32) {}

fn ple_x(i: u32) -> vec4<f32> {
    return vec4<f32>(0.0);
}
