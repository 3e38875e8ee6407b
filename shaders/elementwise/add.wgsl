// x[x_off + i] += y[y_off + i] for i < n.
const WG: u32 = 256u;

struct Params {
    n: u32,
    x_off: u32,
    y_off: u32,
    groups_x: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read> y: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = (wg.x + wg.y * p.groups_x) * WG + lid;
    if (i >= p.n) {
        return;
    }
    x[p.x_off + i] += y[p.y_off + i];
}
