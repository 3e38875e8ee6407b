// Workgroup sum and max over WG invocations (the same contract as reduce.wgsl) by subgroup
// operations, for devices whose subgroups all have SGS invocations (a compile-time
// constant the encoder prepends), subgroup i holding invocations SGS·i .. SGS·i + SGS - 1.
// Each subgroup reduces its values, one invocation per subgroup leaves the result in
// workgroup memory, and after one barrier every invocation adds those WG / SGS partials
// in order, so all of them hold the same bits (kernels branch on the result uniformly).
// Two barriers, where reduce.wgsl takes three and two chains of workgroup-memory reads:
// the reduction dominated small decode kernels. The partials are read as one broadcast
// each, not reduced by a second subgroup operation, whose shuffle steps each wait on the
// last (H100, three alternated runs: 270M decode 1,412-1,419 -> 1,426-1,435 tok/s, E2B
// 397.0-398.2 -> 398.3-402.9).
const RED_PARTS: u32 = WG / SGS;

var<workgroup> red_part: array<f32, RED_PARTS>;

fn wg_sum(v: f32, lid: u32) -> f32 {
    let s = subgroupAdd(v);
    if (lid % SGS == 0u) {
        red_part[lid / SGS] = s;
    }
    workgroupBarrier();
    var t = 0.0;
    for (var i = 0u; i < RED_PARTS; i++) {
        t += red_part[i];
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
    for (var i = 0u; i < RED_PARTS; i++) {
        t = max(t, red_part[i]);
    }
    workgroupBarrier();
    return t;
}

// Four sums at once, each component added exactly as wg_sum adds a scalar (the same bits:
// kernels that norm a head here match those that norm it alone), in one pair of barriers.
var<workgroup> red_part4: array<vec4<f32>, RED_PARTS>;

fn wg_sum4(v: vec4<f32>, lid: u32) -> vec4<f32> {
    let s = vec4<f32>(subgroupAdd(v.x), subgroupAdd(v.y), subgroupAdd(v.z), subgroupAdd(v.w));
    if (lid % SGS == 0u) {
        red_part4[lid / SGS] = s;
    }
    workgroupBarrier();
    var t = vec4<f32>(0.0);
    for (var i = 0u; i < RED_PARTS; i++) {
        t += red_part4[i];
    }
    workgroupBarrier();
    return t;
}
