// Prefill attention over blocks of query rows (flash style, online softmax): one workgroup
// takes R rows, the query heads of one KV head for R / group consecutive tokens, and
// streams that block's keys in tiles of KT, so every K and V element it reads serves R
// rows (attention.wgsl's per-token workgroups read each key once per token).
//
// 128 invocations as 8 row groups × 16 column groups; invocation (rg, cg) owns rows
// rg*SR .. rg*SR + SR. Per tile it scores keys cg + 16j (j < SK) against its rows, over
// head_dim in chunks of 64 staged in workgroup memory (q and K rows read whole by 16
// invocations each), then accumulates output dimensions 4(cg + 16n) .. +3 (n < NV) of its
// rows over the tile's keys, V read straight from the cache (16 invocations read a
// row's 256 bytes; the row groups share them through the cache). Each row's max is taken
// over the tile's scores in workgroup memory by all 16 invocations of its row group
// alike, so the running (m, l) need no exchange.
//
// Splits: workgroup (kv head, block, split) covers keys [lo + split*chunk, +chunk) of the
// block's range, lo being the first token's first key; with splits > 1 it writes each
// row's partial state for attention_merge.wgsl (attention_common.wgsl's layout), which
// combines any partition of a row's keys. The header sets HD4 (head_dim / 4), VHD4
// (v_head_dim / 4), SR, SK, NV = ceil(VHD4 / 16), VFULL (VHD4 a multiple of 16) and
// PREFETCH (below).
// Composed with attention_common.wgsl and kv_f32.wgsl or kv_f16.wgsl.
const WG: u32 = 128u;
const PER: u32 = 1u; // sizes attention_common.wgsl's store(), which this kernel does not use
const R: u32 = 8u * SR;
const KT: u32 = 16u * SK;
const DC4: u32 = 16u; // head_dim chunk, in vec4
const DS: u32 = DC4 + 1u; // row stride of the staged chunks: rows 4 banks apart
const CHUNKS: u32 = (HD4 + DC4 - 1u) / DC4;
const KL: u32 = KT * DC4 / WG; // K chunk vec4s per invocation (R * DC4 / WG = SR for q)

@group(0) @binding(2) var<storage, read> kc: array<KC>;
@group(0) @binding(3) var<storage, read> vc: array<KC>;
// q bound again as vec4, read so where q_off is a multiple of 4 (the model's case).
@group(0) @binding(5) var<storage, read> q4: array<vec4<f32>>;

var<workgroup> q_s: array<vec4<f32>, R * DS>;
var<workgroup> k_s: array<vec4<f32>, KT * DS>;
var<workgroup> s_s: array<f32, R * KT>;
var<workgroup> p_s: array<f32, R * KT>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let group = p.n_heads / p.kv_heads;
    let tb = R / group; // tokens per block (the caller keeps group ≤ R)
    let blocks = (p.n_tokens + tb - 1u) / tb;
    let g = wg.x + wg.y * p.groups_x;
    if (g >= p.kv_heads * blocks * p.splits) {
        return;
    }
    let split = g % p.splits;
    let blk = (g / p.splits) % blocks;
    let kvh = g / (p.splits * blocks);
    let t0 = blk * tb;
    let rows = (min(t0 + tb, p.n_tokens) - t0) * group;
    let hi = p.pos0 + t0 + rows / group; // one past the last token's position
    let k0 = first_key(p.pos0 + t0) + split * p.chunk;
    let k1 = min(k0 + p.chunk, hi);

    let rg = lid / 16u;
    let cg = lid % 16u;
    // This invocation's rows: their position and first key (a row past the block's end
    // sees no key).
    var pos: array<u32, SR>;
    var first: array<u32, SR>;
    for (var i = 0u; i < SR; i++) {
        let r = rg * SR + i;
        pos[i] = p.pos0 + t0 + r / group;
        first[i] = first_key(pos[i]);
        if (r >= rows) {
            first[i] = pos[i] + 1u;
        }
    }
    var m: array<f32, SR>;
    var l: array<f32, SR>;
    var acc: array<array<vec4<f32>, NV>, SR>;
    for (var i = 0u; i < SR; i++) {
        m[i] = NEG;
        l[i] = 0.0;
    }

    // With PREFETCH each chunk's q and K are loaded into registers while the previous
    // chunk's products run (chunk 0 of the next tile during the last chunk), else just
    // before they are stored to workgroup memory. The three load sites are written out:
    // functions returning the register arrays measured 5-7% slower on an H100.
    var qr: array<vec4<f32>, SR>;
    var kr: array<vec4<f32>, KL>;
    if (PREFETCH && k0 < k1) {
        for (var u = 0u; u < SR; u++) {
            qr[u] = q_part(0u, lid + u * WG, t0, kvh, group, rows);
        }
        for (var u = 0u; u < KL; u++) {
            kr[u] = k_part(k0, 0u, lid + u * WG, k1, kvh);
        }
    }
    for (var t = k0; t < k1; t += KT) {
        // Scores of keys t + cg + 16j (loads clamped into range, the scores masked below).
        var sc: array<array<f32, SK>, SR>;
        for (var c = 0u; c < CHUNKS; c++) {
            if (!PREFETCH) {
                for (var u = 0u; u < SR; u++) {
                    qr[u] = q_part(c, lid + u * WG, t0, kvh, group, rows);
                }
                for (var u = 0u; u < KL; u++) {
                    kr[u] = k_part(t, c, lid + u * WG, k1, kvh);
                }
            }
            workgroupBarrier(); // the previous chunk's readers are done
            for (var u = 0u; u < SR; u++) {
                let i = lid + u * WG;
                q_s[(i / DC4) * DS + i % DC4] = qr[u];
            }
            for (var u = 0u; u < KL; u++) {
                let i = lid + u * WG;
                k_s[(i / DC4) * DS + i % DC4] = kr[u];
            }
            workgroupBarrier();
            var nt = t;
            var nc = c + 1u;
            if (nc == CHUNKS) {
                nt = t + KT;
                nc = 0u;
            }
            if (PREFETCH && nt < k1) {
                for (var u = 0u; u < SR; u++) {
                    qr[u] = q_part(nc, lid + u * WG, t0, kvh, group, rows);
                }
                for (var u = 0u; u < KL; u++) {
                    kr[u] = k_part(nt, nc, lid + u * WG, k1, kvh);
                }
            }
            for (var d4 = 0u; d4 < DC4; d4++) {
                var kv: array<vec4<f32>, SK>;
                for (var j = 0u; j < SK; j++) {
                    kv[j] = k_s[(cg + 16u * j) * DS + d4];
                }
                for (var i = 0u; i < SR; i++) {
                    let qv = q_s[(rg * SR + i) * DS + d4];
                    for (var j = 0u; j < SK; j++) {
                        sc[i][j] += dot(qv, kv[j]);
                    }
                }
            }
        }
        var s: array<array<f32, SK>, SR>;
        for (var i = 0u; i < SR; i++) {
            for (var j = 0u; j < SK; j++) {
                let key = t + cg + 16u * j;
                s[i][j] = select(NEG, sc[i][j] * p.scale, key < k1 && key >= first[i] && key <= pos[i]);
                s_s[(rg * SR + i) * KT + cg + 16u * j] = s[i][j];
            }
        }
        workgroupBarrier();

        // Each row's new running max; this invocation's weights into p_s.
        var alpha: array<f32, SR>;
        for (var i = 0u; i < SR; i++) {
            var mt = m[i];
            for (var j = 0u; j < KT; j++) {
                mt = max(mt, s_s[(rg * SR + i) * KT + j]);
            }
            alpha[i] = exp(m[i] - mt);
            m[i] = mt;
            for (var j = 0u; j < SK; j++) {
                p_s[(rg * SR + i) * KT + cg + 16u * j] = select(0.0, exp(s[i][j] - mt), s[i][j] > 0.5 * NEG);
            }
        }
        workgroupBarrier();

        for (var i = 0u; i < SR; i++) {
            l[i] *= alpha[i];
            for (var n = 0u; n < NV; n++) {
                acc[i][n] *= alpha[i];
            }
        }
        for (var j = 0u; j < KT; j++) {
            let vb = (min(t + j, k1 - 1u) * p.kv_heads + kvh) * VHD4;
            var vv: array<vec4<f32>, NV>;
            for (var n = 0u; n < NV; n++) {
                let d4 = cg + 16u * n;
                if (VFULL || d4 < VHD4) {
                    vv[n] = v4(vb + d4);
                }
            }
            for (var i = 0u; i < SR; i++) {
                let w = p_s[(rg * SR + i) * KT + j];
                l[i] += w;
                for (var n = 0u; n < NV; n++) {
                    acc[i][n] += w * vv[n];
                }
            }
        }
    }

    for (var i = 0u; i < SR; i++) {
        let r = rg * SR + i;
        if (r >= rows) {
            continue;
        }
        let th = row_th(t0, kvh, group, r);
        var ob = p.out_off + th * (4u * VHD4);
        var scale = 1.0 / l[i];
        if (p.splits > 1u) {
            ob = (th * p.splits + split) * (4u * VHD4 + 2u);
            if (cg == 0u) {
                out[ob] = m[i];
                out[ob + 1u] = l[i];
            }
            ob += 2u;
            scale = 1.0;
        }
        for (var n = 0u; n < NV; n++) {
            let d4 = cg + 16u * n;
            if (VFULL || d4 < VHD4) {
                let v = acc[i][n] * scale;
                out[ob + 4u * d4] = v.x;
                out[ob + 4u * d4 + 1u] = v.y;
                out[ob + 4u * d4 + 2u] = v.z;
                out[ob + 4u * d4 + 3u] = v.w;
            }
        }
    }
}

// Query row (token * n_heads + head) of row r of the block starting at token t0.
fn row_th(t0: u32, kvh: u32, group: u32, r: u32) -> u32 {
    return (t0 + r / group) * p.n_heads + kvh * group + r % group;
}

// Element i (< R * DC4) of chunk c of the block's q rows, as q_s holds it (zero past the
// rows and head_dim). Staged per tile: keeping the whole q block in workgroup memory
// instead measured slower on an H100 (fewer workgroups fit an SM).
fn q_part(c: u32, i: u32, t0: u32, kvh: u32, group: u32, rows: u32) -> vec4<f32> {
    let r = i / DC4;
    let d4 = c * DC4 + i % DC4;
    if (r >= rows || d4 >= HD4) {
        return vec4<f32>(0.0);
    }
    let qb = p.q_off + row_th(t0, kvh, group, r) * (4u * HD4) + 4u * d4;
    if (p.q_off % 4u == 0u) {
        return q4[qb / 4u];
    }
    return vec4<f32>(q[qb], q[qb + 1u], q[qb + 2u], q[qb + 3u]);
}

// Element i (< KT * DC4) of chunk c of the K rows of the tile from key t (keys clamped
// below k1; zero past head_dim).
fn k_part(t: u32, c: u32, i: u32, k1: u32, kvh: u32) -> vec4<f32> {
    let d4 = c * DC4 + i % DC4;
    if (d4 >= HD4) {
        return vec4<f32>(0.0);
    }
    return k4((min(t + i / DC4, k1 - 1u) * p.kv_heads + kvh) * HD4 + d4);
}
