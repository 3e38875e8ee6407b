// The sum of matmul_coop.wgsl's split-K partials: y[y_off + t * y_stride + row0 + r] =
// Σ_s part[(s * n + t) * rows + r], the ranges added in order. CPU twin: the sum in
// `gpu::matmul_coop::split_k_sum_cpu`.

struct Params {
    n: u32,
    rows: u32,
    splits: u32,
    y_off: u32,
    y_stride: u32,
    row0: u32,
    groups_x: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> part: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = (wg.x + wg.y * p.groups_x) * 256u + lid;
    if (i >= p.n * p.rows) {
        return;
    }
    var sum = part[i];
    for (var s = 1u; s < p.splits; s++) {
        sum += part[s * p.n * p.rows + i];
    }
    y[p.y_off + (i / p.rows) * p.y_stride + p.row0 + i % p.rows] = sum;
}
