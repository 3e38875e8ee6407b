// MoE routing, one workgroup per token and one invocation per expert: the token's top_k
// experts (ties: lower index first), their weights renormalised over the chosen and
// multiplied by per_expert_scale[e]. Writes ids/weights[t*top_k + slot] in rank order.
// Each expert counts how many beat it (its rank), so there is no sort, and every chosen
// expert writes its own slot. Softmax is monotone, so ranking the logits ranks the
// probabilities, and the renormalised probabilities are softmax over the chosen logits
// (the full softmax's denominator cancels): no reduction over every expert. CPU twin:
// `cpu::ops::moe_route`, in the same steps.
// In decode this runs once a layer on one SM, so its chain of waits is the whole cost:
// the first version counted ranks two experts an invocation and left the renormalisation
// and the stores to one invocation, a global load each slot; ~12 µs a layer on an H200
// (Gemma 4 26B-A4B decode 242 -> 266 tok/s with routing left out, timing only). Taking
// the softmax's two reductions out gained 0.2-0.5% more (H200, 128 tokens after 16 and
// 512, two commands).
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

// Every expert's logit, read 4 at a time by the ranking.
var<workgroup> logit_of: array<vec4<f32>, WG / 4u>;
// The chosen experts' logits, by rank.
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
    logit_of[e / 4u][e % 4u] = logit;
    workgroupBarrier();
    var rank = 0xFFFFFFFFu;
    if (valid) {
        rank = 0u;
        let n = vec4<u32>(p.n_experts);
        for (var o4 = 0u; o4 < (p.n_experts + 3u) / 4u; o4++) {
            let w = logit_of[o4];
            let o = vec4<u32>(4u * o4) + vec4<u32>(0u, 1u, 2u, 3u);
            let beats = (o < n) & ((w > vec4<f32>(logit)) | ((w == vec4<f32>(logit)) & (o < vec4<u32>(e))));
            rank += dot(select(vec4<u32>(0u), vec4<u32>(1u), beats), vec4<u32>(1u));
        }
    }
    let picked = rank < p.top_k;
    if (picked) {
        chosen[rank] = logit;
    }
    workgroupBarrier();
    if (picked) {
        // exp(logit - top) over the chosen's sum of the same, summed in rank order as the
        // CPU twin does.
        var total = 0.0;
        for (var s = 0u; s < p.top_k; s++) {
            total += exp(chosen[s] - chosen[0]);
        }
        ids[t * p.top_k + rank] = e;
        weights[t * p.top_k + rank] = exp(logit - chosen[0]) / total * scale;
    }
}
