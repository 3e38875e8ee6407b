// Rows of up to 16 · WG floats held by one workgroup as vec4 words, four an invocation:
// words lid + j · WG (j = 0..3) in the columns of a mat4x4, registers whatever the
// compiler does with loops. Kernels load the four words of a buffer in one expression at
// clamped indices (`Row.k`), so every load is unconditional and in flight before the
// first is used (in decode a one-workgroup kernel's chain of waits is its whole cost;
// docs/performance-log.md, forty-third session), and `Row.ok` keeps the words past the row
// out of sums and stores. WG comes from the including kernel.

// Token t's row of d floats (d4 words from word b): the invocation's words c, the same
// clamped into the row (k, for loads), and which of c lie in it (ok).
struct Row {
    b: u32,
    d4: u32,
    c: vec4<u32>,
    k: vec4<u32>,
    ok: vec4<bool>,
}

fn row_of(t: u32, d: u32, lid: u32) -> Row {
    let d4 = d / 4u;
    let c = vec4<u32>(lid) + vec4<u32>(0u, WG, 2u * WG, 3u * WG);
    return Row(t * d4, d4, c, min(c, vec4<u32>(d4 - 1u)), c < vec4<u32>(d4));
}

// The sum of squares of the words that lie in the row.
fn row_sq(m: mat4x4<f32>, ok: vec4<bool>) -> f32 {
    return select(0.0, dot(m[0], m[0]), ok.x) + select(0.0, dot(m[1], m[1]), ok.y)
        + select(0.0, dot(m[2], m[2]), ok.z) + select(0.0, dot(m[3], m[3]), ok.w);
}
