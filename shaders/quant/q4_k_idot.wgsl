// The Q4_K chunk dot product with x as integer limbs (matmul/matvec_x_limbs.wgsl; chunk
// loads in q4_k_chunk.wgsl). A chunk's low nibbles are run 4g + j%2 of its block, its
// high nibbles run 4g + 2 + j%2 (j the chunk in the block, g = j/2): each is one integer
// dot product, with the run's sum for the min term.
fn chunk_dot(t: Chunk, row_byte: u32, c: u32, xo: u32) -> f32 {
    let j = c % 8u;
    let g = j / 2u;
    let dm = unpack2x16float(t.head.x);
    let sm = k4_reg_scales(t.head, g);
    // The staged input starts at element 0 (x's offset is applied when staging).
    let r = (c / 8u) * 16u + 4u * g + (j % 2u);
    let nib = vec4<u32>(0x0F0F0F0Fu);
    let lo = run_idot(t.qv & nib, r);
    let hi = run_idot((t.qv >> vec4<u32>(4u)) & nib, r + 2u);
    let l = (dm.x * sm.x) * lo.x - (dm.y * sm.y) * lo.y;
    return l + ((dm.x * sm.z) * hi.x - (dm.y * sm.w) * hi.y);
}
