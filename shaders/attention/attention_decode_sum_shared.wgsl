// attention_decode.wgsl's key_sum through workgroup memory, where subgroups cannot hold a
// key's S invocations. The next write to `part` comes after the caller's barrier on the
// scores, which every invocation reaches after its reads here.
var<workgroup> part: array<f32, WG>;

fn key_sum(d: f32, lid: u32) -> f32 {
    part[lid] = d;
    workgroupBarrier();
    let b = lid / S * S;
    var t = 0.0;
    for (var u = 0u; u < S; u++) {
        t += part[b + u];
    }
    return t;
}
