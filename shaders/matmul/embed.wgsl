// Row gather: out[t, :] = scale * row ids[ids_off + t] of the table tile, dequantized with
// the type file's dq4 (the token embedding and the per-layer embedding lookups).
// One thread per vec4 of a row. Ids past the whole table give a zero row (written by the
// dispatch of the first tile); ids in other tiles are left to those tiles' dispatches.
const WG: u32 = 64u;

struct Params {
    cols4: u32,
    row_bytes: u32,
    n: u32,
    ids_off: u32,
    out_off: u32,
    row0: u32,       // first table row of this tile
    rows: u32,       // rows in this tile
    total_rows: u32, // rows of the whole table
    scale: f32,
    chunks: u32,     // workgroups per output row
    groups_x: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> ids: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let lin = wg.x + wg.y * p.groups_x;
    let t = lin / p.chunks;
    let k4 = (lin % p.chunks) * WG + lid;
    if (t >= p.n || k4 >= p.cols4) {
        return;
    }
    let row = ids[p.ids_off + t];
    var v = vec4<f32>(0.0);
    if (row >= p.total_rows) {
        if (p.row0 != 0u) {
            return;
        }
    } else if (row < p.row0 || row >= p.row0 + p.rows) {
        return;
    } else {
        v = dq4((row - p.row0) * p.row_bytes, k4) * p.scale;
    }
    let o = p.out_off + t * p.cols4 * 4u + 4u * k4;
    out[o] = v.x;
    out[o + 1u] = v.y;
    out[o + 2u] = v.z;
    out[o + 3u] = v.w;
}
