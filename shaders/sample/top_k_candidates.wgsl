// The kk best (value, id) of a list, best first: larger value wins, equal values go to the
// lower id. Each workgroup takes a chunk of WG*PER entries; every invocation keeps its PER
// entries sorted in registers and offers its best remaining one; kk rounds of a workgroup
// arg-best each emit one winner and advance the invocation that offered it.
//
// Input: values from in_vals[in_off..][..n]; ids are the positions (explicit_ids == 0) or
// in_ids[..n] (a previous pass's output; INVALID marks an empty slot). Workgroup g writes
// its kk winners at out_*[out_*_off + g*kk ..]; chained passes reduce to one workgroup.
const WG: u32 = 256u;
const PER: u32 = 16u;
const INVALID: u32 = 0xffffffffu;

struct Params {
    n: u32,
    in_off: u32,
    explicit_ids: u32,
    kk: u32,
    out_val_off: u32,
    out_id_off: u32,
    groups_x: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> in_vals: array<f32>;
@group(0) @binding(2) var<storage, read> in_ids: array<u32>;
@group(0) @binding(3) var<storage, read_write> out_vals: array<f32>;
@group(0) @binding(4) var<storage, read_write> out_ids: array<u32>;

var<workgroup> best_v: array<f32, WG>;
var<workgroup> best_i: array<u32, WG>;

// Whether (av, ai) ranks before (bv, bi); an INVALID id ranks after everything.
fn better(av: f32, ai: u32, bv: f32, bi: u32) -> bool {
    if (ai == INVALID) {
        return false;
    }
    if (bi == INVALID) {
        return true;
    }
    return av > bv || (av == bv && ai < bi);
}

struct Entry {
    v: f32,
    id: u32,
}

// Input entry j: its value and id.
fn entry(j: u32) -> Entry {
    var idx = j;
    if (p.explicit_ids != 0u) {
        idx = in_ids[j];
    }
    return Entry(in_vals[p.in_off + j], idx);
}

// The best of the workgroup's offers (v, id): its id, with its value in best_v[0].
fn wg_best(v: f32, id: u32, lid: u32) -> u32 {
    best_v[lid] = v;
    best_i[lid] = id;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s /= 2u) {
        if (lid < s && better(best_v[lid + s], best_i[lid + s], best_v[lid], best_i[lid])) {
            best_v[lid] = best_v[lid + s];
            best_i[lid] = best_i[lid + s];
        }
        workgroupBarrier();
    }
    return best_i[0];
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let g = wg.x + wg.y * p.groups_x;
    if (g * WG * PER >= p.n) {
        return;
    }
    if (p.kk == 1u) {
        // Arg-best (greedy decoding): a running best per invocation, in registers. The sorted
        // lists below index private arrays at run time, which keeps them in memory: ~25 µs
        // a pass on an H100 for what this does in a few.
        var bv = 0.0;
        var bi = INVALID;
        for (var i = 0u; i < PER; i++) {
            let j = g * WG * PER + i * WG + lid;
            if (j < p.n) {
                let e = entry(j);
                if (better(e.v, e.id, bv, bi)) {
                    bv = e.v;
                    bi = e.id;
                }
            }
        }
        let wi = wg_best(bv, bi, lid);
        if (lid == 0u) {
            out_vals[p.out_val_off + g] = best_v[0];
            out_ids[p.out_id_off + g] = wi;
        }
        return;
    }
    var v: array<f32, PER>;
    var id: array<u32, PER>;
    var cnt = 0u;
    for (var i = 0u; i < PER; i++) {
        let j = g * WG * PER + i * WG + lid;
        if (j < p.n) {
            let e = entry(j);
            if (e.id != INVALID) {
                // Insertion into the sorted private list.
                var c = cnt;
                while (c > 0u && better(e.v, e.id, v[c - 1u], id[c - 1u])) {
                    v[c] = v[c - 1u];
                    id[c] = id[c - 1u];
                    c--;
                }
                v[c] = e.v;
                id[c] = e.id;
                cnt++;
            }
        }
    }
    var head = 0u;
    for (var r = 0u; r < p.kk; r++) {
        var cv = 0.0;
        var ci = INVALID;
        if (head < cnt) {
            cv = v[head];
            ci = id[head];
        }
        let wi = wg_best(cv, ci, lid);
        if (lid == 0u) {
            out_vals[p.out_val_off + g * p.kk + r] = best_v[0];
            out_ids[p.out_id_off + g * p.kk + r] = wi;
        }
        if (head < cnt && id[head] == wi) {
            head++;
        }
        workgroupBarrier();
    }
}
