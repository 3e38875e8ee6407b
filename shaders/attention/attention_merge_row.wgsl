// The merge of one query row's split partial states, shared by attention_merge.wgsl (a
// dispatch of its own) and attention_decode_merge.wgsl (the last split of a row to finish
// merges it): out = Σ_s e^(m_s - M) acc_s / Σ_s e^(m_s - M) l_s with M = max_s m_s. Empty
// splits carry l = 0 and m = -3e38 and so weigh nothing.
// Each invocation merges its own output dimensions alone: it loads a batch of MB splits'
// (m, l) and its dimensions' partials together (one wait on memory per batch), and folds
// the batch in with the online-softmax rescaling. Every invocation computes the same M and
// weights from the same values, so no workgroup reduction or barrier is needed. (Reading
// the (m, l) pairs, reducing them over the workgroup and then the partials took three
// round trips to memory and four barriers: the tail of every decode attention step. The
// pairs loaded once into workgroup memory instead, one invocation a pair, with batches of
// up to 32 partials an invocation, so half the waits at decode's 16-32 splits: slower, H200
// E2B decode after 512 tokens -1.8%, registers unchanged; so was merging 4 dimensions an
// invocation with a quarter of the invocations, -0.9%; docs/performance-log.md, 52nd session.)
// The includer defines WG (≥ 256), merge_part(i) (element i of the partials: row r's split
// s at (r * splits + s) * (v_head_dim + 2), as attention_common.wgsl stores them) and
// merge_out(i, v) (element i = r * v_head_dim + d of the row-major output), and
// MERGE_PER, the output dimensions per invocation (ceil(v_head_dim / WG), or the most any
// v_head_dim ≤ 512 needs where the kernel serves them all), and MB, the splits a batch
// loads (attention.rs's merge_batch: fewer registers and repeated loads beat fewer rounds).

fn merge_row(row: u32, splits: u32, v_head_dim: u32, lid: u32) {
    let stride = v_head_dim + 2u;
    let base = row * splits * stride;
    var m = -3.0e38;
    var l = 0.0;
    var acc: array<f32, MERGE_PER>;
    for (var s0 = 0u; s0 < splits; s0 += MB) {
        // Past the last split the batch reads the last one again and weighs it 0.
        var ms: array<f32, MB>;
        var ls: array<f32, MB>;
        var ps: array<array<f32, MB>, MERGE_PER>;
        for (var s = 0u; s < MB; s++) {
            let at = base + min(s0 + s, splits - 1u) * stride;
            ms[s] = merge_part(at);
            ls[s] = merge_part(at + 1u);
            for (var i = 0u; i < MERGE_PER; i++) {
                ps[i][s] = merge_part(at + 2u + min(lid + i * WG, v_head_dim - 1u));
            }
        }
        var bm = m;
        for (var s = 0u; s < MB; s++) {
            bm = max(bm, ms[s]);
        }
        let alpha = exp(m - bm);
        l *= alpha;
        for (var i = 0u; i < MERGE_PER; i++) {
            acc[i] *= alpha;
        }
        for (var s = 0u; s < MB; s++) {
            let w = select(0.0, exp(ms[s] - bm), s0 + s < splits);
            l += w * ls[s];
            for (var i = 0u; i < MERGE_PER; i++) {
                acc[i] += w * ps[i][s];
            }
        }
        m = bm;
    }
    let inv_l = 1.0 / l;
    for (var i = 0u; i < MERGE_PER; i++) {
        let d = lid + i * WG;
        if (d < v_head_dim) {
            merge_out(row * v_head_dim + d, acc[i] * inv_l);
        }
    }
}
