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

// Four sums at once in one pair of barriers, and in log2(SGS) + 1 shuffle steps instead
// of four reductions' 4 · log2(SGS) (SGS >= 4): the first two steps halve what each
// invocation holds (it keeps two sums, sends its partner the other two, then keeps one),
// so invocation l of a subgroup ends with component 2 (l & 1) + (l >> 1 & 1) over all its
// lanes, summed by butterflies; every invocation then adds the subgroups' partials in
// order, so all hold the same bits. Four subgroupAdds took ~0.8 µs of decode attention's
// chain (H100, three alternated rounds: E2B decode 463.6-465.0 -> 465.1-467.7 tok/s).
var<workgroup> red_part4: array<vec4<f32>, RED_PARTS>;

fn wg_sum4(v: vec4<f32>, lid: u32) -> vec4<f32> {
    let odd = (lid & 1u) != 0u;
    let send2 = select(v.zw, v.xy, odd);
    let t2 = select(v.xy, v.zw, odd) + vec2<f32>(subgroupShuffleXor(send2.x, 1u), subgroupShuffleXor(send2.y, 1u));
    let second = (lid & 2u) != 0u;
    var t = select(t2.x, t2.y, second) + subgroupShuffleXor(select(t2.y, t2.x, second), 2u);
    for (var o = 4u; o < SGS; o *= 2u) {
        t += subgroupShuffleXor(t, o);
    }
    let l = lid % SGS;
    if (l < 4u) {
        red_part4[lid / SGS][2u * (l & 1u) + (l >> 1u)] = t;
    }
    workgroupBarrier();
    var r = vec4<f32>(0.0);
    for (var i = 0u; i < RED_PARTS; i++) {
        r += red_part4[i];
    }
    workgroupBarrier();
    return r;
}
