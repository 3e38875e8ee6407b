// reduce_tile with subgroup sums: one subgroupAdd per value, then the subgroup partials
// are added through workgroup memory. NSG bounds the number of subgroups (WG / the
// smallest subgroup size wgpu admits).
struct Ids {
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_invocation_id) lane: u32,
    @builtin(subgroup_id) sg: u32,
    @builtin(num_subgroups) n_sg: u32,
}

var<workgroup> partial: array<f32, RW * T * NSG>;

// Sum each of the RW * T values of `acc` over the workgroup into `sums`.
fn reduce_tile(acc: ptr<function, array<f32, RW * T>>, id: Ids) {
    for (var v = 0u; v < RW * T; v++) {
        let s = subgroupAdd((*acc)[v]);
        if (id.lane == 0u) {
            partial[v * NSG + id.sg] = s;
        }
    }
    workgroupBarrier();
    if (id.lid < RW * T) {
        var s = 0.0;
        for (var g = 0u; g < id.n_sg; g++) {
            s += partial[id.lid * NSG + g];
        }
        sums[id.lid] = s;
    }
    workgroupBarrier();
}
