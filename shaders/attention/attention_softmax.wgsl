// Softmax of attention scores in place, for attention by tensor-core products
// (gpu::attention_coop): row r of `s` (nk floats from r · nk) holds query row r's dot
// products with keys k_lo .. k_lo + nk; it becomes that row's weights, 0 for keys the
// query does not see. Row r is token r / heads of the block, at position pos0 + r / heads,
// which sees keys first_key(pos) ..= pos (sliding window, or all). One workgroup per row;
// rows up to WG · KEEP keys are read once and kept in registers between the passes.
// Composed with a workgroup reduction (common/reduce*.wgsl). CPU twin:
// `gpu::attention_coop::attention_softmax_cpu`.
const WG: u32 = 256u;
const KEEP: u32 = 4u;
const NEG: f32 = -3.0e38;

struct Params {
    rows: u32,
    nk: u32,
    heads: u32,
    pos0: u32,
    k_lo: u32,
    window: u32,
    scale: f32,
    groups_x: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> s: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let row = wg.x + wg.y * p.groups_x;
    if (row >= p.rows) {
        return;
    }
    let pos = p.pos0 + row / p.heads;
    var first = 0u;
    if (p.window > 0u && pos + 1u > p.window) {
        first = pos + 1u - p.window;
    }
    let base = row * p.nk;
    var keep: array<f32, KEEP>;
    var m = NEG;
    for (var j = 0u; j < KEEP; j++) {
        keep[j] = logit(lid + j * WG, base, first, pos);
        m = max(m, keep[j]);
    }
    for (var i = lid + KEEP * WG; i < p.nk; i += WG) {
        m = max(m, logit(i, base, first, pos));
    }
    m = wg_max(m, lid);
    var l = 0.0;
    for (var j = 0u; j < KEEP; j++) {
        keep[j] = weight(keep[j], m);
        l += keep[j];
    }
    for (var i = lid + KEEP * WG; i < p.nk; i += WG) {
        l += weight(logit(i, base, first, pos), m);
    }
    let inv = 1.0 / wg_sum(l, lid);
    for (var j = 0u; j < KEEP; j++) {
        let i = lid + j * WG;
        if (i < p.nk) {
            s[base + i] = keep[j] * inv;
        }
    }
    for (var i = lid + KEEP * WG; i < p.nk; i += WG) {
        s[base + i] = weight(logit(i, base, first, pos), m) * inv;
    }
}

// Key i's scaled score, NEG where the query does not see it (or past the row).
fn logit(i: u32, base: u32, first: u32, pos: u32) -> f32 {
    let key = p.k_lo + i;
    if (i >= p.nk || key < first || key > pos) {
        return NEG;
    }
    return s[base + i] * p.scale;
}

fn weight(x: f32, m: f32) -> f32 {
    return select(0.0, exp(x - m), x > 0.5 * NEG);
}
