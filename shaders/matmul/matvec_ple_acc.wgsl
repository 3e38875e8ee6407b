// The down projection's part of the per-layer-embedding gate (matvec_ple.wgsl): after its
// rows, each workgroup adds their terms of the gate's sums. Bindings: other = Gt (PH ×
// PD), ra = h, w_post, and the sums (read-write, atomic).

@group(0) @binding(12) var<storage, read_write> ple_acc: array<atomic<i64>>;

// Each row's Gt entry for this invocation's gate index, h and w_post (loaded before the
// matvec, so their trip overlaps it), and the rows' d with a 1 where the row exists (rows
// past the end compute the last row again).
var<private> ple_gt: array<f32, ROWS>;
var<private> ple_hw: array<vec2<f32>, ROWS>;
var<workgroup> ple_d: array<vec2<f32>, ROWS>;

fn to_fx(v: f32) -> i64 {
    return i64(round(clamp(v, -1e9, 1e9) * FX));
}

fn ple_preload(lin: u32, lid: u32) {
    let j = min(lid, PD - 1u);
    for (var i = 0u; i < ROWS; i++) {
        let r = p.row0 + min(lin * ROWS + i, p.rows - 1u);
        ple_gt[i] = other[r * PD + j];
        ple_hw[i] = vec2<f32>(ra[r], w_post[r]);
    }
}

// Row `row`'s result v, in its lane 0.
fn ple_row(lid: u32, lane: u32, row: u32, v: f32) {
    if (lane == 0u) {
        ple_d[lid / TPR] = select(vec2<f32>(0.0), vec2<f32>(v, 1.0), row < p.rows);
    }
}

fn ple_accumulate(lin: u32, lid: u32) {
    workgroupBarrier();
    var sh = 0.0;
    var sd = 0.0;
    for (var i = 0u; i < ROWS; i++) {
        let dv = ple_d[i];
        sh += ple_gt[i] * ple_hw[i].x * dv.y;
        sd += ple_gt[i] * ple_hw[i].y * dv.x;
    }
    if (lid < PD) {
        let base = p.acc_off + (lin % COPIES) * 2u * PD;
        atomicAdd(&ple_acc[base + lid], to_fx(sh));
        atomicAdd(&ple_acc[base + PD + lid], to_fx(sd));
    }
}

fn ple_gate(lin: u32, lid: u32) {}

fn ple_x(i: u32) -> vec4<f32> {
    return vec4<f32>(0.0);
}
