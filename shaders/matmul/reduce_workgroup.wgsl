// reduce_tile without subgroups: a tree sum in workgroup memory, the T values of one row
// at a time (T * WG floats of scratch).
struct Ids {
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
}

var<workgroup> scratch: array<f32, T * WG>;

// Sum each of the RW * T values of `acc` over the workgroup into `sums`.
fn reduce_tile(acc: ptr<function, array<f32, RW * T>>, id: Ids) {
    for (var r = 0u; r < RW; r++) {
        for (var i = 0u; i < T; i++) {
            scratch[i * WG + id.lid] = (*acc)[r * T + i];
        }
        workgroupBarrier();
        for (var s = WG / 2u; s > 0u; s = s / 2u) {
            if (id.lid < s) {
                for (var i = 0u; i < T; i++) {
                    scratch[i * WG + id.lid] += scratch[i * WG + id.lid + s];
                }
            }
            workgroupBarrier();
        }
        if (id.lid < T) {
            sums[r * T + id.lid] = scratch[id.lid * WG];
        }
        workgroupBarrier();
    }
}
