// Parameters and bindings shared by matmul.wgsl and matmul_coop.wgsl (see matmul.wgsl).

struct Params {
    cols4: u32,      // columns / 4
    rows: u32,       // rows to compute: the tile's (matmul) or one expert's (expert mode)
    row_bytes: u32,
    n: u32,          // tokens, or token-slot pairs in expert mode
    x_off4: u32,     // x offset in vec4s
    y_off: u32,
    y_stride: u32,   // y row length
    row0: u32,       // y column of the tile's first row (matmul)
    top_k: u32,      // 0: plain matmul
    e0: u32,         // expert mode: first expert of this tile
    e_count: u32,    // experts in this tile
    x_per_slot: u32, // expert mode: x holds one row per pair (else one per token)
    ids_off: u32,
    row_groups: u32,
    groups_x: u32,
    x_stride4: u32,  // x row stride in vec4s
    w_row0: u32,     // matmul: first weight row (in the tile buffer) of row 0
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read> ids: array<u32>;
