// row_sums for matvec.wgsl with subgroup sums, for devices whose subgroups are exactly 32
// invocations, subgroup i holding invocations 32i..32i+31 (a row's TPR invocations are
// whole subgroups, or for TPR < 32 an aligned part of one). TPR <= 32 needs no barrier at
// all, where the workgroup-memory tree took five. The result is valid in the row's lane 0.
var<workgroup> sg_part: array<vec2<f32>, WG / 32u>;

fn row_sums(acc: f32, acc2: f32, lid: u32, lane: u32) -> vec2<f32> {
    if (TPR < 32u) {
        // Several rows per subgroup: a butterfly within each row's TPR lanes.
        var t = vec2<f32>(acc, acc2);
        for (var o = TPR / 2u; o > 0u; o /= 2u) {
            t += vec2<f32>(subgroupShuffleXor(t.x, o), subgroupShuffleXor(t.y, o));
        }
        return t;
    }
    let s = vec2<f32>(subgroupAdd(acc), subgroupAdd(acc2));
    if (TPR == 32u) {
        return s;
    }
    if (lid % 32u == 0u) {
        sg_part[lid / 32u] = s;
    }
    workgroupBarrier();
    var t = vec2<f32>(0.0);
    let first = (lid / TPR) * (TPR / 32u);
    for (var i = 0u; i < TPR / 32u; i++) {
        t += sg_part[first + i];
    }
    return t;
}

// The largest m among invocations 4i .. 4i + 3 (lid's four; all invocations call it).
fn run_max4(m: f32, lid: u32) -> f32 {
    let a = max(m, subgroupShuffleXor(m, 1u));
    return max(a, subgroupShuffleXor(a, 2u));
}
