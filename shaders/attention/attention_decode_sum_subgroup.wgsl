// attention_decode.wgsl's key_sum by subgroup shuffles, for devices whose subgroups all
// have SGS >= S invocations, subgroup i holding invocations SGS·i .. SGS·i + SGS - 1 (a
// key's S invocations are an aligned part of one): a butterfly over the S lanes, with no
// barrier or workgroup memory.
fn key_sum(d: f32, lid: u32) -> f32 {
    var t = d;
    for (var o = S / 2u; o > 0u; o /= 2u) {
        t += subgroupShuffleXor(t, o);
    }
    return t;
}
