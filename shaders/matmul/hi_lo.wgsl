// f16 hi and lo parts of values already scaled for matmul_coop.wgsl: v = hi + lo · 2^-11
// to ~2^-22 relative. Shared by split_f16.wgsl (the parts in memory) and the product
// kernel's staging of quantized weights (matmul_coop_w_quant.wgsl). CPU twin:
// `gpu::matmul_coop::split_f16_cpu`.
//
// hi is v with its significand cut to f16's 10 bits by a mask (exact in f16), 0 below
// f16's smallest normal; lo = f16((v - hi) · 2^11), scaled up to stay clear of f16
// subnormals, which a device may flush. The mask rather than a round trip through f16: a
// device compiler may fold f32(f16(v)) back to v (an H100's does).

// Where there is no lo part (the including kernel's LO false) hi is v rounded to the
// nearest f16 instead (ties away from zero: half of f16's last place added to the
// magnitude before the cut), so the products' inputs carry no bias toward zero; values
// past f16's range are only cut, as they would be in f32. CPU twin: `round_f16_cpu`.

const LS: f32 = 2048.0;

fn hi_part(v: vec4<f32>) -> vec4<f32> {
    let half_ulp = select(vec4<u32>(0u), vec4<u32>(0x1000u), vec4<bool>(!LO) & abs(v) < vec4<f32>(65504.0));
    let cut = bitcast<vec4<f32>>((bitcast<vec4<u32>>(v) + half_ulp) & vec4<u32>(0xFFFFE000u));
    return select(cut, vec4<f32>(0.0), abs(v) < vec4<f32>(6.103515625e-5));
}

// The source row of output row r of a split of `rows` rows, or NONE (declared by the
// including kernel) for a row of zeros: r itself, or with pairs (half > 0) blocks of 2 ·
// half rows, the first half gate rows and then their up rows `off` further on, `rows`
// counting pairs. A stacked [gate; up] so interleaved puts each gate row and its up row
// in one subgroup of matmul_coop.wgsl (its GEGLU).
fn split_row(r: u32, rows: u32, half: u32, off: u32) -> u32 {
    if (half == 0u) {
        return select(NONE, r, r < rows);
    }
    let pair = (r / (2u * half)) * half + r % half;
    if (pair >= rows) {
        return NONE;
    }
    return pair + select(0u, off, r % (2u * half) >= half);
}

// v's hi part packed in .xy, its lo part in .zw.
fn hi_lo(v: vec4<f32>) -> vec4<u32> {
    let h = hi_part(v);
    let l = (v - h) * LS;
    return vec4<u32>(pack2x16float(h.xy), pack2x16float(h.zw), pack2x16float(l.xy), pack2x16float(l.zw));
}
