// Workgroup sum and max over WG invocations (the same contract as reduce.wgsl) by subgroup
// operations, for devices whose subgroups all have SGS invocations (a compile-time
// constant the encoder prepends), subgroup i holding invocations SGS·i .. SGS·i + SGS - 1.
// Each subgroup reduces its values, one invocation per subgroup leaves the result in
// workgroup memory, and after one barrier every subgroup reduces those WG / SGS partials
// the same way, so all invocations hold the same bits (kernels branch on the result
// uniformly). Two barriers and no serial folds, where reduce.wgsl takes three barriers and
// two chains of workgroup-memory reads: the reduction dominated small decode kernels.
const RED_PARTS: u32 = WG / SGS;

var<workgroup> red_part: array<f32, RED_PARTS>;

fn red_lane(lid: u32, i: u32) -> u32 {
    return min(i + lid % SGS, RED_PARTS - 1u);
}

fn wg_sum(v: f32, lid: u32) -> f32 {
    let s = subgroupAdd(v);
    if (lid % SGS == 0u) {
        red_part[lid / SGS] = s;
    }
    workgroupBarrier();
    var t = 0.0;
    for (var i = 0u; i < RED_PARTS; i += SGS) {
        t += subgroupAdd(select(0.0, red_part[red_lane(lid, i)], i + lid % SGS < RED_PARTS));
    }
    // The partials are free again only once everyone has read them.
    workgroupBarrier();
    return t;
}

fn wg_max(v: f32, lid: u32) -> f32 {
    let s = subgroupMax(v);
    if (lid % SGS == 0u) {
        red_part[lid / SGS] = s;
    }
    workgroupBarrier();
    var t = -3.4e38;
    for (var i = 0u; i < RED_PARTS; i += SGS) {
        t = max(t, subgroupMax(red_part[red_lane(lid, i)]));
    }
    workgroupBarrier();
    return t;
}
