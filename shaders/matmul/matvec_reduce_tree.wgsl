// row_sums for matvec.wgsl in workgroup memory, for any subgroup size: a halving tree over
// each row's TPR partials (acc, acc2). The result is valid in the row's lane 0.
var<workgroup> part: array<vec2<f32>, WG>;

fn row_sums(acc: f32, acc2: f32, lid: u32, lane: u32) -> vec2<f32> {
    part[lid] = vec2<f32>(acc, acc2);
    workgroupBarrier();
    for (var s = TPR / 2u; s > 0u; s /= 2u) {
        if (lane < s) {
            part[lid] += part[lid + s];
        }
        workgroupBarrier();
    }
    return part[lid];
}

// The largest m among invocations 4i .. 4i + 3 (lid's four; all invocations call it, in
// uniform control flow).
var<workgroup> run_part: array<f32, WG>;

fn run_max4(m: f32, lid: u32) -> f32 {
    // A barrier first: the previous call's readers are done with run_part.
    workgroupBarrier();
    run_part[lid] = m;
    workgroupBarrier();
    let b = lid & ~3u;
    return max(max(run_part[b], run_part[b + 1u]), max(run_part[b + 2u], run_part[b + 3u]));
}
