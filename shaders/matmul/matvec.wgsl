// Matrix-vector product for decoding one token, y[r] = Σ_c w[r, c] · x[c], over one tile of
// weight rows stored as raw GGUF blocks. Composed after a header (WG, TPR, RW), the weight
// type's shaders/quant files and its chunk dot product (`CH`, `chunk_dot(row_byte, c, xs)`:
// the dot product of chunk c — elements c·CH .. c·CH + CH — of the row at byte row_byte
// with those elements of x, held in xs; shaders/quant/dot_generic.wgsl builds one from dq4).
//
// TPR invocations share RW rows and stride over their chunks: each reads whole blocks
// with several loads in flight, and loads each x chunk once for its RW rows (x traffic
// through the cache would otherwise be several times the weights'). WG / TPR · RW rows per
// workgroup. The TPR partial sums meet in workgroup memory (works for any subgroup size).
//
// Epilogues (`mode`): 0 none; 1 (GELU_PAIR) the tile holds [gate; up] (2 × rows rows) and
// the invocations of a row also take its up row: y[r] = gelu_tanh(gate · x) · (up · x)
// (the FFN's GeGLU); 2 (GELU_MUL) y[r] = gelu_tanh(w_r · x) · other[other_off + r] (the
// per-layer-embedding gate).

struct Params {
    chunks: u32,     // chunks per row
    rows: u32,       // output rows
    row_bytes: u32,
    x_off4: u32,     // x offset in vec4s
    y_off: u32,
    row0: u32,       // y index of the tile's first row
    groups_x: u32,
    mode: u32,
    other_off: u32,
}

const GELU_PAIR: u32 = 1u;
const GELU_MUL: u32 = 2u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read> other: array<f32>;

const ROWS: u32 = WG / TPR * RW;
var<workgroup> part: array<f32, WG * RW>;
var<workgroup> part2: array<f32, WG * RW>;

fn gelu_tanh(v: f32) -> f32 {
    return 0.5 * v * (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let lin = wg.x + wg.y * p.groups_x;
    let lane = lid % TPR;
    let row0 = lin * ROWS + (lid / TPR) * RW;
    var rb: array<u32, RW>;
    for (var r = 0u; r < RW; r++) {
        // Rows past the end compute the last row again and are not written.
        rb[r] = min(row0 + r, p.rows - 1u) * p.row_bytes;
    }
    let up = p.rows * p.row_bytes;
    var acc: array<f32, RW>;
    var acc2: array<f32, RW>;
    var xs: array<vec4<f32>, CH / 4u>;
    for (var c = lane; c < p.chunks; c += TPR) {
        for (var i = 0u; i < CH / 4u; i++) {
            xs[i] = x[p.x_off4 + c * (CH / 4u) + i];
        }
        for (var r = 0u; r < RW; r++) {
            acc[r] += chunk_dot(rb[r], c, &xs);
            if (p.mode == GELU_PAIR) {
                acc2[r] += chunk_dot(rb[r] + up, c, &xs);
            }
        }
    }
    for (var r = 0u; r < RW; r++) {
        part[r * WG + lid] = acc[r];
        part2[r * WG + lid] = acc2[r];
    }
    workgroupBarrier();
    for (var s = TPR / 2u; s > 0u; s /= 2u) {
        if (lane < s) {
            for (var r = 0u; r < RW; r++) {
                part[r * WG + lid] += part[r * WG + lid + s];
                part2[r * WG + lid] += part2[r * WG + lid + s];
            }
        }
        workgroupBarrier();
    }
    if (lane < RW && row0 + lane < p.rows) {
        let row = row0 + lane;
        let first = lid - lane;
        var v = part[lane * WG + first];
        if (p.mode == GELU_PAIR) {
            v = gelu_tanh(v) * part2[lane * WG + first];
        } else if (p.mode == GELU_MUL) {
            v = gelu_tanh(v) * other[p.other_off + row];
        }
        y[p.y_off + p.row0 + row] = v;
    }
}
