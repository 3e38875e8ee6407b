// Token-expert pairs grouped by expert for the tensor-core expert product (prefill), in
// one workgroup. ids[p] is pair p's expert. Each expert's pairs get a run of rows of their
// own, padded to whole tiles of `bm`, so that a tile of rows is one expert's:
//   poff[e]      the first padded row of expert e (poff[n_experts]: the end),
//   map[row]     the pair in padded row `row`, or NONE for padding,
//   tile_e[i]    the expert of tile i (rows i·bm ..).
// All three live in `info` (u32 words from map_off, poff_off and tile_off), beside the row
// scales the split writes there. Pairs take their rows within their expert's run in
// arrival order (an atomic counter): the order of rows does not change any result, since
// each row's products are its own. Ids past n_experts are left out (no row).
// CPU twin: gpu::moe::moe_sort_cpu.
const WG: u32 = 256u;
const MAX_E: u32 = 256u;
const NONE: u32 = 0xFFFFFFFFu;

struct Params {
    pairs: u32,
    n_experts: u32,
    bm: u32,
    rows: u32, // padded rows the map covers (a bound on poff[n_experts])
    map_off: u32,
    poff_off: u32,
    tile_off: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> ids: array<u32>;
@group(0) @binding(2) var<storage, read_write> info: array<u32>;

var<workgroup> count: array<atomic<u32>, MAX_E>;
var<workgroup> start: array<u32, MAX_E + 1u>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32) {
    for (var e = lid; e < p.n_experts; e += WG) {
        atomicStore(&count[e], 0u);
    }
    workgroupBarrier();
    for (var i = lid; i < p.pairs; i += WG) {
        let e = ids[i];
        if (e < p.n_experts) {
            atomicAdd(&count[e], 1u);
        }
    }
    workgroupBarrier();
    // A serial scan: at most MAX_E steps in workgroup memory.
    if (lid == 0u) {
        var at = 0u;
        for (var e = 0u; e < p.n_experts; e++) {
            start[e] = at;
            info[p.poff_off + e] = at;
            at += (atomicLoad(&count[e]) + p.bm - 1u) / p.bm * p.bm;
            atomicStore(&count[e], 0u);
        }
        start[p.n_experts] = at;
        info[p.poff_off + p.n_experts] = at;
    }
    workgroupBarrier();
    for (var r = lid; r < p.rows; r += WG) {
        info[p.map_off + r] = NONE;
    }
    for (var e = lid; e < p.n_experts; e += WG) {
        for (var t = start[e] / p.bm; t < start[e + 1u] / p.bm; t++) {
            info[p.tile_off + t] = e;
        }
    }
    // The map's NONEs land before any pair overwrites them.
    storageBarrier();
    for (var i = lid; i < p.pairs; i += WG) {
        let e = ids[i];
        if (e < p.n_experts) {
            info[p.map_off + start[e] + atomicAdd(&count[e], 1u)] = i;
        }
    }
}
