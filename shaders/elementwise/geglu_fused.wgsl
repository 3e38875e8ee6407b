// Rows of [gate(width) | up(width)]: the gate half becomes gelu(gate) * up (in place).
// One buffer, so a fused gate/up matmul output needs no second binding of itself.
const WG: u32 = 256u;

struct Params {
    rows: u32,
    width: u32,
    off: u32,
    groups_x: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = (wg.x + wg.y * p.groups_x) * WG + lid;
    if (i >= p.rows * p.width) {
        return;
    }
    let r = i / p.width;
    let g = p.off + r * 2u * p.width + i % p.width;
    x[g] = gelu_tanh(x[g]) * x[g + p.width];
}
