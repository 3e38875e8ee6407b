// MoE routing, one workgroup per token: softmax over the token's n_experts logits, the
// top_k most probable (ties: lower index first), their probabilities renormalised over the
// chosen and multiplied by per_expert_scale[e]. Writes ids/weights[t*top_k + slot] in rank
// order. The rank of each expert is counted directly (how many beat it), so no sort.
const WG: u32 = 64u;
const MAX_E: u32 = 256u;
const MAX_K: u32 = 32u;

struct Params {
    n: u32,
    n_experts: u32,
    top_k: u32,
    logits_off: u32,
    groups_x: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read> per_expert_scale: array<f32>;
@group(0) @binding(3) var<storage, read_write> ids: array<u32>;
@group(0) @binding(4) var<storage, read_write> weights: array<f32>;

var<workgroup> prob: array<f32, MAX_E>;
var<workgroup> chosen: array<u32, MAX_K>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = wg.x + wg.y * p.groups_x;
    if (t >= p.n) {
        return;
    }
    let base = p.logits_off + t * p.n_experts;
    var mx = -3.0e38;
    for (var e = lid; e < p.n_experts; e += WG) {
        mx = max(mx, logits[base + e]);
    }
    let m = wg_max(mx, lid);
    var part = 0.0;
    for (var e = lid; e < p.n_experts; e += WG) {
        let v = exp(logits[base + e] - m);
        prob[e] = v;
        part += v;
    }
    let sum = wg_sum(part, lid);
    for (var e = lid; e < p.n_experts; e += WG) {
        prob[e] = prob[e] / sum;
    }
    workgroupBarrier();
    for (var e = lid; e < p.n_experts; e += WG) {
        let v = prob[e];
        var rank = 0u;
        for (var o = 0u; o < p.n_experts; o++) {
            let w = prob[o];
            if (w > v || (w == v && o < e)) {
                rank++;
            }
        }
        if (rank < p.top_k) {
            chosen[rank] = e;
        }
    }
    workgroupBarrier();
    if (lid == 0u) {
        var total = 0.0;
        for (var s = 0u; s < p.top_k; s++) {
            total += prob[chosen[s]];
        }
        for (var s = 0u; s < p.top_k; s++) {
            let e = chosen[s];
            ids[t * p.top_k + s] = e;
            weights[t * p.top_k + s] = prob[e] / total * per_expert_scale[e];
        }
    }
}
