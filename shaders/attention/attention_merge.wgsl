// Combine the partials of split attention (attention.wgsl, attention_tiled.wgsl or
// attention_decode.wgsl with splits > 1), one workgroup per (token, head) row, by
// attention_merge_row.wgsl. Composed with that file.
const WG: u32 = 256u;
// One kernel for every v_head_dim ≤ 512.
const MERGE_PER: u32 = (512u + WG - 1u) / WG;

struct Params {
    rows: u32,
    splits: u32,
    v_head_dim: u32,
    out_off: u32,
    groups_x: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> part: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

fn merge_part(i: u32) -> f32 {
    return part[i];
}

fn merge_out(i: u32, v: f32) {
    out[p.out_off + i] = v;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let row = wg.x + wg.y * p.groups_x;
    if (row >= p.rows) {
        return;
    }
    merge_row(row, p.splits, p.v_head_dim, lid);
}
