// gate[r*gs + i] = gelu(gate[r*gs + i]) * up[r*us + i] for r < rows, i < width (in place).
const WG: u32 = 256u;

struct Params {
    rows: u32,
    width: u32,
    gate_off: u32,
    gate_stride: u32,
    up_off: u32,
    up_stride: u32,
    groups_x: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> gate: array<f32>;
@group(0) @binding(2) var<storage, read> up: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = (wg.x + wg.y * p.groups_x) * WG + lid;
    if (i >= p.rows * p.width) {
        return;
    }
    let r = i / p.width;
    let c = i % p.width;
    let g = p.gate_off + r * p.gate_stride + c;
    gate[g] = gelu_tanh(gate[g]) * up[p.up_off + r * p.up_stride + c];
}
