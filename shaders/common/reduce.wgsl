// Workgroup sum and max over WG invocations (WG, a multiple of 32, is defined by the
// including shader). Three barriers whatever WG is: 32 invocations each fold a column of
// the WG values, then every invocation folds the 32 partials itself, in the same order,
// so all of them hold the same bits (kernels branch on the result uniformly). A halving
// tree took 2·log2(WG) + 1 barriers, which dominated small kernels.
var<workgroup> red_scratch: array<f32, WG>;
var<workgroup> red_lane: array<f32, 32>;

fn wg_sum(v: f32, lid: u32) -> f32 {
    red_scratch[lid] = v;
    workgroupBarrier();
    if (lid < 32u) {
        var s = 0.0;
        for (var i = lid; i < WG; i += 32u) {
            s += red_scratch[i];
        }
        red_lane[lid] = s;
    }
    workgroupBarrier();
    var t = 0.0;
    for (var i = 0u; i < 32u; i++) {
        t += red_lane[i];
    }
    // The scratch is free again only once everyone has read it.
    workgroupBarrier();
    return t;
}

fn wg_max(v: f32, lid: u32) -> f32 {
    red_scratch[lid] = v;
    workgroupBarrier();
    if (lid < 32u) {
        var s = red_scratch[lid];
        for (var i = lid + 32u; i < WG; i += 32u) {
            s = max(s, red_scratch[i]);
        }
        red_lane[lid] = s;
    }
    workgroupBarrier();
    var t = red_lane[0];
    for (var i = 1u; i < 32u; i++) {
        t = max(t, red_lane[i]);
    }
    workgroupBarrier();
    return t;
}

// Four sums at once, each component added exactly as wg_sum adds a scalar (the same bits:
// kernels that norm a head here match those that norm it alone), in one round of barriers.
var<workgroup> red_scratch4: array<vec4<f32>, WG>;
var<workgroup> red_lane4: array<vec4<f32>, 32>;

fn wg_sum4(v: vec4<f32>, lid: u32) -> vec4<f32> {
    red_scratch4[lid] = v;
    workgroupBarrier();
    if (lid < 32u) {
        var s = vec4<f32>(0.0);
        for (var i = lid; i < WG; i += 32u) {
            s += red_scratch4[i];
        }
        red_lane4[lid] = s;
    }
    workgroupBarrier();
    var t = vec4<f32>(0.0);
    for (var i = 0u; i < 32u; i++) {
        t += red_lane4[i];
    }
    workgroupBarrier();
    return t;
}
