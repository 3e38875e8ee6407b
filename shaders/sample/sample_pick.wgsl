// Temperature sampling over the candidates top_k_candidates left (best first), for one
// uniform draw `u` from the host's stream: softmax at `temperature` over the first `n`,
// cut by top-p and min-p, then the candidate where u × the kept mass falls. Writes the
// chosen id at out[out_idx], where the next decode step reads its input token.
// At most 128 candidates (sample::MAX_CANDIDATES): one invocation walks them in order, exactly as the CPU twin
// (runtime::sampler::pick_sorted) does.

struct Params {
    n: u32,
    out_idx: u32,
    temperature: f32,
    top_p: f32,
    min_p: f32,
    u: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> vals: array<f32>;
@group(0) @binding(2) var<storage, read> ids: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(1)
fn main() {
    let max = vals[0];
    var probs: array<f32, 128>;
    var sum = 0.0;
    for (var i = 0u; i < p.n; i++) {
        probs[i] = exp((vals[i] - max) / p.temperature);
        sum += probs[i];
    }
    for (var i = 0u; i < p.n; i++) {
        probs[i] /= sum;
    }
    var keep = p.n;
    if (p.top_p < 1.0) {
        var acc = 0.0;
        for (var i = 0u; i < p.n; i++) {
            acc += probs[i];
            if (acc >= p.top_p) {
                keep = i + 1u;
                break;
            }
        }
    }
    if (p.min_p > 0.0) {
        let floor = probs[0] * p.min_p;
        var above = 1u;
        while (above < p.n && probs[above] >= floor) {
            above++;
        }
        keep = min(keep, above);
    }
    var total = 0.0;
    for (var i = 0u; i < keep; i++) {
        total += probs[i];
    }
    var r = p.u * total;
    var pick = keep - 1u;
    for (var i = 0u; i < keep; i++) {
        r -= probs[i];
        if (r <= 0.0) {
            pick = i;
            break;
        }
    }
    out[p.out_idx] = ids[pick];
}
