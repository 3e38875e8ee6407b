// The merge of one query row's split partial states, shared by attention_merge.wgsl (a
// dispatch of its own) and attention_decode_merge.wgsl (the last split of a row to finish
// merges it): out = Σ_s e^(m_s - M) acc_s / Σ_s e^(m_s - M) l_s with M = max_s m_s. Empty
// splits carry l = 0 and m = -3e38 and so weigh nothing. The splits' (m, l) are read once,
// in parallel, M and the denominator reduced over the workgroup, and each split's weight
// e^(m_s - M) / L computed once into workgroup memory before the output dimensions are
// summed. (Looping over the splits three times per invocation, weights recomputed per
// dimension, made this a ~20 µs step in decode.)
// The includer defines WG (≥ 256), merge_part(i) (element i of the partials: row r's split
// s at (r * splits + s) * (v_head_dim + 2), as attention_common.wgsl stores them) and
// merge_out(i, v) (element i = r * v_head_dim + d of the row-major output), and composes
// common/reduce*.wgsl.
const MERGE_PER: u32 = (512u + WG - 1u) / WG; // output dimensions per invocation: v_head_dim ≤ 512

var<workgroup> merge_w: array<f32, WG>;

fn merge_row(row: u32, splits: u32, v_head_dim: u32, lid: u32) {
    let stride = v_head_dim + 2u;
    let base = row * splits * stride;
    var mx = -3.0e38;
    for (var s = lid; s < splits; s += WG) {
        mx = max(mx, merge_part(base + s * stride));
    }
    let m = wg_max(mx, lid);
    var l = 0.0;
    for (var s = lid; s < splits; s += WG) {
        l += exp(merge_part(base + s * stride) - m) * merge_part(base + s * stride + 1u);
    }
    let inv_l = 1.0 / wg_sum(l, lid);
    var acc: array<f32, MERGE_PER>;
    for (var s0 = 0u; s0 < splits; s0 += WG) {
        if (s0 + lid < splits) {
            merge_w[lid] = exp(merge_part(base + (s0 + lid) * stride) - m) * inv_l;
        }
        workgroupBarrier();
        let count = min(WG, splits - s0);
        for (var i = 0u; i < MERGE_PER; i++) {
            let d = lid + i * WG;
            if (d < v_head_dim) {
                var a = acc[i];
                for (var s = 0u; s < count; s++) {
                    a += merge_w[s] * merge_part(base + (s0 + s) * stride + 2u + d);
                }
                acc[i] = a;
            }
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < MERGE_PER; i++) {
        let d = lid + i * WG;
        if (d < v_head_dim) {
            merge_out(row * v_head_dim + d, acc[i]);
        }
    }
}
