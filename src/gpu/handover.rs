//! Hand-over between dependent dispatches through memory instead of pipeline barriers
//! (`RULLAMA_HANDOVER=1`, NVIDIA Vulkan; a decode step's batches).
//!
//! A pipeline barrier between dependent dispatches costs ~2 µs on NVIDIA's Vulkan driver
//! (`examples/barrier_bench.rs`), and the next dispatch only starts its weight loads after
//! it. Without barriers the driver overlaps consecutive dispatches; each workgroup of a
//! handover kernel then waits, spinning on an atomic counter, until every workgroup of the
//! dispatch before it has arrived, and arrives itself when done
//! (`examples/handover_bench.rs`: 1.4-2.4 µs a dispatch saved when the workgroups load
//! weights first, on an H200). Waiting for the dispatch just before is enough: it waited
//! for its own predecessor before doing anything but load weights.
//!
//! wgpu inserts a barrier wherever a buffer's usage needs one, so a handover kernel's
//! bindings are all declared read-only storage to wgpu (between read-only uses it inserts
//! none), and its SPIR-V, which writes some of them, is made here by naga and handed to
//! the driver as is (`Features::PASSTHROUGH_SHADERS`). Every storage binding is `@coherent`:
//! with no barrier nothing invalidates an SM's cache, and a stale line there served wrong
//! activations in the benchmark. The dispatch's counter, the counter to wait on and the
//! arrivals to wait for come as immediates.
//!
//! What this relies on, measured rather than promised by Vulkan: the driver starts a
//! dispatch's workgroups only after every workgroup of the dispatches before it has
//! started (so a spinning consumer never holds the place of a producer that has not
//! started), and a buffer barrier waits for all earlier compute work (a batch starts
//! with one, clearing the counters). A spin gives up after `SPIN_LIMIT` rounds and raises
//! a flag the batch's owner can read (`failed`), so a broken assumption shows as an
//! error, not a hang.

use std::borrow::Cow;

use super::device::Gpu;
use crate::{Error, Result};

/// Immediates a handover dispatch takes: its counter, the counter it waits on, and how many
/// arrivals it waits for (0: none), padded to 16 bytes.
pub const IMMEDIATE_BYTES: u32 = 16;

/// Rounds a spinning invocation polls before it gives up and raises the failure flag.
const SPIN_LIMIT: u32 = 1 << 22;

/// The handover kernel's WGSL, appended to the kernel's own source; `binding` is the first
/// binding after the kernel's buffers. The failure flag is counter 0; dispatch counters
/// start at 1.
fn helpers(binding: usize) -> String {
    format!(
        "
var<immediate> ho: vec4<u32>;
@group(0) @binding({binding}) var<storage, read_write> ho_ctr: array<atomic<u32>>;

// Waits until the dispatch before has arrived whole (immediate z: its workgroup count).
fn ho_wait(lid: u32) {{
    if (ho.z != 0u) {{
        if (lid == 0u) {{
            var spins = 0u;
            while (atomicLoad(&ho_ctr[ho.y]) < ho.z && spins < {SPIN_LIMIT}u) {{
                spins += 1u;
            }}
            if (spins >= {SPIN_LIMIT}u) {{
                atomicStore(&ho_ctr[0], 1u);
            }}
        }}
        storageBarrier();
    }}
}}

// The storage barrier orders this workgroup's writes before its arrival at device scope.
fn ho_arrive(lid: u32) {{
    storageBarrier();
    if (lid == 0u) {{
        atomicAdd(&ho_ctr[ho.x], 1u);
    }}
}}
"
    )
}

/// Read-only storage that nothing writes (weights, norm weights, constant tables): read
/// through the SM's cache. Every other storage binding is `@coherent`.
const CONSTANT_BINDINGS: [&str; 14] = ["w", "w4", "wq", "wk", "wh", "wl", "weights", "w_pre", "w_post", "post_w", "router_w", "expert_w", "inv_freq", "factors"];

/// A line of WGSL, with `@coherent` added if it declares storage that may change.
fn coherent(line: &str) -> String {
    let Some(at) = line.find("var<storage, ") else { return line.to_string() };
    let rest = &line[at..];
    let name = rest.split('>').nth(1).and_then(|r| r.split(':').next()).unwrap_or("").trim();
    if line.contains("@coherent") || rest.starts_with("var<storage, read>") && CONSTANT_BINDINGS.contains(&name) {
        return line.to_string();
    }
    format!("{}@coherent {}", &line[..at], rest)
}

/// Whether a kernel's WGSL calls `ho_wait` itself, after the loads that do not depend on
/// the dispatch before (its weights). Other kernels wait first thing.
fn waits_itself(code: &str) -> bool {
    code.contains("ho_wait(")
}

/// A kernel's WGSL as compiled normally: `ho_wait`, where called, does nothing.
pub fn plain(code: &str) -> std::borrow::Cow<'_, str> {
    if waits_itself(code) { format!("{code}\nfn ho_wait(lid: u32) {{}}\n").into() } else { code.into() }
}

/// The handover form of a kernel's WGSL: storage that may change `@coherent`, the entry
/// point renamed `ho_body` and called from a new entry point of the same name and
/// attributes that waits first (unless the body does) and arrives last.
pub fn source(code: &str, entry: &str, n_buffers: usize) -> Result<String> {
    let bad = |why: &str| Error::Gpu(format!("handover: {why} in kernel entry {entry}"));
    // DEV (timing only): RULLAMA_HO_COHERENT=rw leaves read-only activations cached.
    let rw_only = std::env::var("RULLAMA_HO_COHERENT").is_ok_and(|v| v == "rw");
    let code: String = code.lines().map(|l| if rw_only && l.contains("var<storage, read>") { l.to_string() + "\n" } else { coherent(l) + "\n" }).collect();
    let sig = format!("fn {entry}(");
    let at = code.find(&sig).ok_or_else(|| bad("no entry point"))?;
    let attrs_at = code[..at].rfind("@compute").ok_or_else(|| bad("no @compute"))?;
    let attrs = code[attrs_at..at].trim().to_string();
    let params_at = at + sig.len();
    // The parameters end at the first ')' outside an attribute's parentheses.
    let mut depth = 0i32;
    let mut end = None;
    for (i, c) in code[params_at..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => {
                end = Some(params_at + i);
                break;
            }
            ')' => depth -= 1,
            _ => {}
        }
    }
    let end = end.ok_or_else(|| bad("unclosed parameters"))?;
    let params = code[params_at..end].trim().trim_end_matches(',').to_string();
    let mut names = Vec::new();
    let mut decls = Vec::new();
    let mut lid = None;
    for p in params.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        // A plain function's parameters carry no builtin attributes.
        let decl = p.rsplit(')').next().unwrap_or(p).trim();
        decls.push(decl.to_string());
        let name = decl.split(':').next().unwrap_or("").trim().to_string();
        if p.contains("@builtin(local_invocation_index)") {
            lid = Some(name.clone());
        }
        names.push(name);
    }
    let (extra, lid) = match lid {
        Some(l) => (String::new(), l),
        None => (format!("{}@builtin(local_invocation_index) ho_lid: u32", if params.is_empty() { "" } else { ", " }), "ho_lid".to_string()),
    };
    let wait = if waits_itself(&code) { String::new() } else { format!("    ho_wait({lid});\n") };
    let mut out = String::with_capacity(code.len() + 1024);
    out.push_str(&code[..attrs_at]);
    out.push_str(&format!("fn ho_body({}", decls.join(", ")));
    out.push_str(&code[end..]);
    out.push_str(&helpers(n_buffers + 1));
    out.push_str(&format!(
        "\n{attrs}\nfn {entry}({params}{extra}) {{\n{wait}    ho_body({});\n    ho_arrive({lid});\n}}\n",
        names.join(", ")
    ));
    Ok(out)
}

/// SPIR-V of a handover kernel's WGSL, made with the options wgpu's Vulkan backend uses for
/// our kernels on a device with robust buffer access 2 (NVIDIA's): indices clamped, buffer
/// accesses left to the device's robustness, integer division checks, no loop bounding,
/// workgroup memory zeroed by the driver.
pub fn spirv(gpu: &Gpu, name: &str, code: &str, entry: &str) -> Result<(Vec<u32>, (u32, u32, u32))> {
    use naga::back::spv;
    let fail = |what: String| Error::Gpu(format!("handover kernel {name}: {what}"));
    let module = naga::front::wgsl::parse_str(code).map_err(|e| fail(e.emit_to_string(code)))?;
    let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::all())
        .validate(&module)
        .map_err(|e| fail(format!("{e:?}")))?;
    let ep = module.entry_points.iter().find(|e| e.name == entry).ok_or_else(|| fail("no entry point".into()))?;
    let [x, y, z] = ep.workgroup_size;
    let mut options = spv::Options { lang_version: (1, 5), ..Default::default() };
    options.bounds_check_policies = naga::proc::BoundsCheckPolicies {
        index: naga::proc::BoundsCheckPolicy::Restrict,
        buffer: naga::proc::BoundsCheckPolicy::Unchecked,
        image_load: naga::proc::BoundsCheckPolicy::Restrict,
        binding_array: naga::proc::BoundsCheckPolicy::Unchecked,
    };
    options.zero_initialize_workgroup_memory = spv::ZeroInitializeWorkgroupMemoryMode::Native;
    options.force_loop_bounding = false;
    options.use_storage_input_output_16 = gpu.f16;
    let pipeline = spv::PipelineOptions { shader_stage: naga::ShaderStage::Compute, entry_point: entry.to_string() };
    let words = spv::write_vec(&module, &info, &options, Some(&pipeline)).map_err(|e| fail(format!("{e}")))?;
    Ok((words, (x, y, z)))
}

/// The shader module of a handover kernel.
pub fn module(gpu: &Gpu, name: &str, code: &str, entry: &str) -> Result<wgpu::ShaderModule> {
    let (words, size) = spirv(gpu, name, code, entry)?;
    let desc = wgpu::ShaderModuleDescriptorPassthrough {
        label: Some(name),
        entry_points: Cow::Owned(vec![wgpu::PassthroughShaderEntryPoint { name: Cow::Owned(entry.to_string()), workgroup_size: size }]),
        spirv: Some(Cow::Owned(words)),
        ..Default::default()
    };
    // SAFETY: the SPIR-V comes from naga, from WGSL naga has validated; its bindings are
    // the layout `kernel` makes for it (the same buffers, all storage, plus the counters).
    Ok(unsafe { gpu.device.create_shader_module_passthrough(desc) })
}
