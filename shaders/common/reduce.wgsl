// Workgroup sum over WG invocations (WG is defined by the including shader).
var<workgroup> red_scratch: array<f32, WG>;

fn wg_sum(v: f32, lid: u32) -> f32 {
    red_scratch[lid] = v;
    workgroupBarrier();
    var s = WG / 2u;
    while (s > 0u) {
        if (lid < s) {
            red_scratch[lid] += red_scratch[lid + s];
        }
        workgroupBarrier();
        s = s / 2u;
    }
    let r = red_scratch[0];
    workgroupBarrier();
    return r;
}

// Workgroup max, same pattern.
fn wg_max(v: f32, lid: u32) -> f32 {
    red_scratch[lid] = v;
    workgroupBarrier();
    var s = WG / 2u;
    while (s > 0u) {
        if (lid < s) {
            red_scratch[lid] = max(red_scratch[lid], red_scratch[lid + s]);
        }
        workgroupBarrier();
        s = s / 2u;
    }
    let r = red_scratch[0];
    workgroupBarrier();
    return r;
}
