// The repetition penalty in place on the logits, before the token is picked: each distinct
// token among the last `window` of the history has its logit divided by `penalty` when
// positive, multiplied when not. The history lives in a ring of `ring` token ids on the GPU
// (logical index i at hist[i % ring]), so a pipelined decode step can append its own input
// token without the host. Window entries are [end - window, end). A token that also
// appears earlier in the window is left to that entry, so each logit changes once.
// Positive logits are multiplied by the host's 1 / penalty: GPU division may be approximate
// (2.5 ulp in Vulkan), a product is exact, so the result is within 1 ulp of l / penalty.
// One workgroup. CPU twin: runtime::sampler::apply_repeat_penalty.
const WG: u32 = 256u;

struct Params {
    end: u32,
    window: u32,
    ring: u32,
    vocab: u32,
    penalty: f32,
    inv_penalty: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> hist: array<u32>;
@group(0) @binding(2) var<storage, read_write> logits: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32) {
    let start = p.end - p.window;
    for (var e = start + lid; e < p.end; e += WG) {
        let t = hist[e % p.ring];
        var first = true;
        for (var f = start; f < e; f++) {
            if (hist[f % p.ring] == t) {
                first = false;
                break;
            }
        }
        if (first && t < p.vocab) {
            let l = logits[t];
            logits[t] = select(l * p.penalty, l * p.inv_penalty, l > 0.0);
        }
    }
}
