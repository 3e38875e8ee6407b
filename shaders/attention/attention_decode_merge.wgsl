// attention_decode.wgsl's `finish` when the kernel merges its own splits, instead of an
// attention_merge.wgsl dispatch after it (in decode a dependent dispatch costs ~4 µs on an
// H100 whatever it does). Each split stores its partial state as usual, then counts itself
// in its row's arrival counter; the split that arrives last merges the row into `merged`
// (from p.out_off) and sets the counter back to 0 for the next dispatch. No workgroup
// waits for another, so this needs no guarantee that workgroups run concurrently.
// Ordering: storageBarrier is a device-scope acquire-release fence on storage memory, so
// the partial stores of every split happen before its counter increment, and the merging
// workgroup's reads after its own increment see them. Visibility: `out` (the partials) is
// coherent, so those reads skip the SM's own cache. Without it an H100 can serve a line
// that SM cached earlier in the dispatch (another row's merge reads the line two rows'
// partials share) before the last split wrote it: examples/chain_bench.rs read stale
// data that way.
// Composed with attention_merge_row.wgsl.
@group(0) @binding(4) @coherent var<storage, read_write> out: array<f32>;
@group(0) @binding(11) var<storage, read_write> merged: array<f32>;
@group(0) @binding(12) var<storage, read_write> arrivals: array<atomic<u32>>;

var<workgroup> arrival: u32;

// The head shape is a constant here: partials past v_head_dim are not loaded.
const MERGE_PER: u32 = VPER;

fn merge_part(i: u32) -> f32 {
    return out[i];
}

fn merge_out(i: u32, v: f32) {
    merged[p.out_off + i] = v;
}

fn finish(th: u32, lid: u32) {
    if (p.splits == 1u) {
        return;
    }
    storageBarrier();
    if (lid == 0u) {
        arrival = atomicAdd(&arrivals[th], 1u);
    }
    if (workgroupUniformLoad(&arrival) != p.splits - 1u) {
        return;
    }
    storageBarrier();
    merge_row(th, p.splits, p.v_head_dim, lid);
    if (lid == 0u) {
        atomicStore(&arrivals[th], 0u);
    }
}
