// The attention kernels' output (see attention_common.wgsl), where no workgroup reads what
// another wrote in the same dispatch.
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
