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
