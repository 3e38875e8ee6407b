// MoE routing, one workgroup per token and one invocation per expert: softmax over the
// token's n_experts logits, the top_k most probable (ties: lower index first), their
// probabilities renormalised over the chosen and multiplied by per_expert_scale[e]. Writes
// ids/weights[t*top_k + slot] in rank order. Each expert counts how many beat it (its
// rank), so there is no sort, and every chosen expert writes its own slot.
// In decode this runs once a layer on one SM, so its chain of waits is the whole cost:
// the first version counted ranks two experts an invocation and left the renormalisation
// and the stores to one invocation, a global load each slot; ~12 µs a layer on an H200
// (Gemma 4 26B-A4B decode 242 -> 266 tok/s with routing left out, timing only).
// Composed with a workgroup reduction (common/reduce*.wgsl).
// One invocation an expert: moe.rs's MAX_EXPERTS.
const WG: u32 = 256u;
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

// Every expert's probability (-1 past n_experts, below any real one), read 4 at a time.
var<workgroup> prob: array<vec4<f32>, WG / 4u>;
// The chosen experts' probabilities, by rank.
var<workgroup> chosen: array<f32, MAX_K>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = wg.x + wg.y * p.groups_x;
    if (t >= p.n) {
        return;
    }
    let e = lid;
    let valid = e < p.n_experts;
    // Clamped indices keep the loads unconditional, so both are in flight at once.
    let ec = min(e, p.n_experts - 1u);
    let logit = logits[p.logits_off + t * p.n_experts + ec];
    let scale = per_expert_scale[ec];
    let m = wg_max(select(-3.0e38, logit, valid), lid);
    let v = select(0.0, exp(logit - m), valid);
    let pr = v / wg_sum(v, lid);
    prob[e / 4u][e % 4u] = select(-1.0, pr, valid);
    workgroupBarrier();
    var rank = 0u;
    for (var o4 = 0u; o4 < (p.n_experts + 3u) / 4u; o4++) {
        let w = prob[o4];
        let o = vec4<u32>(4u * o4) + vec4<u32>(0u, 1u, 2u, 3u);
        let beats = (w > vec4<f32>(pr)) | ((w == vec4<f32>(pr)) & (o < vec4<u32>(e)));
        rank += dot(select(vec4<u32>(0u), vec4<u32>(1u), beats), vec4<u32>(1u));
    }
    let picked = valid && rank < p.top_k;
    if (picked) {
        chosen[rank] = pr;
    }
    workgroupBarrier();
    if (picked) {
        // Summed in rank order, as the CPU twin does.
        var total = 0.0;
        for (var s = 0u; s < p.top_k; s++) {
            total += chosen[s];
        }
        ids[t * p.top_k + rank] = e;
        weights[t * p.top_k + rank] = pr / total * scale;
    }
}
