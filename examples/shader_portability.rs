//! Whether the kernels the engine compiled would also compile for Metal and DX12: every
//! WGSL file in DIR (as `RULLAMA_DUMP_WGSL=DIR` writes them, one per kernel compiled) is
//! validated with the capabilities the engine asks of those backends and translated by
//! naga, the translator wgpu uses there, to MSL and to HLSL shader model 6.2: MSL 2.4, or
//! 3.2 for kernels with `@coherent` storage (wgpu offers it on Metal from 3.2, and on
//! DX12). Kernels on cooperative matrices are counted apart: the engine takes them only
//! where the adapter has 16 × 16 f16 fragments on subgroups of 32, which Metal's 8 × 8
//! simdgroup matrices and DX12 (none in wgpu) do not give. Kernels with 64-bit atomic adds
//! (the per-layer-embedding gate's sums, `matmul::PleAcc`) are translated to HLSL 6.6
//! only, which has them; wgpu offers none on Metal, where the engine takes the gate's own
//! matvec instead. Exits 1 on any failure, or
//! when fewer than MIN kernels were found (so an empty or stale dump cannot pass).
//! `scripts/test` runs it over the kernels every test compiled.
//!
//! Workgroup memory needs no check of its own: wgpu already held every kernel to lavapipe's
//! 32 KiB, which is Metal's and D3D12's limit too. What this does not show: that Apple's or
//! Microsoft's shader compilers accept naga's output, or that the kernels compute the same
//! there (no such adapter here).
//!
//! `cargo run --example shader_portability -- DIR [MIN]`

use naga::back::{hlsl, msl};
use naga::valid::{Capabilities, ShaderStages, SubgroupOperationSet, ValidationFlags, Validator};

/// What the engine may use on any backend: `enable f16;`, f16 packing in f32
/// (`unpack2x16float`) and subgroup operations in compute shaders.
const BASE: Capabilities = Capabilities::SHADER_FLOAT16.union(Capabilities::SHADER_FLOAT16_IN_FLOAT32).union(Capabilities::SUBGROUP);

#[derive(Debug, PartialEq)]
enum Outcome {
    /// Translated; the MSL version it needs.
    Portable((u8, u8)),
    Coop,
    /// 64-bit atomic adds: translated to HLSL 6.6, not to MSL.
    Int64,
}

fn validate(module: &naga::Module, caps: Capabilities) -> Result<naga::valid::ModuleInfo, String> {
    Validator::new(ValidationFlags::all(), caps)
        .subgroup_stages(ShaderStages::COMPUTE)
        .subgroup_operations(SubgroupOperationSet::all())
        .validate(module)
        .map_err(|e| format!("{:?}", e.into_inner()))
}

fn check(src: &str) -> Result<Outcome, String> {
    let module = naga::front::wgsl::parse_str(src).map_err(|e| format!("parse: {}", e.emit_to_string(src)))?;
    let coherent = BASE | Capabilities::MEMORY_DECORATION_COHERENT;
    // The fewest capabilities that validate it say what it needs.
    let (info, msl_version) = match validate(&module, BASE) {
        Ok(info) => (info, (2, 4)),
        Err(e) => match validate(&module, coherent) {
            Ok(info) => (info, (3, 2)),
            Err(_) => {
                if validate(&module, coherent | Capabilities::COOPERATIVE_MATRIX).is_ok() {
                    return Ok(Outcome::Coop);
                }
                let int64 = coherent | Capabilities::SHADER_INT64 | Capabilities::SHADER_INT64_ATOMIC_ALL_OPS;
                let info = validate(&module, int64).map_err(|_| format!("validate: {e}"))?;
                hlsl_out(&module, &info, hlsl::ShaderModel::V6_6)?;
                return Ok(Outcome::Int64);
            }
        },
    };
    let mo = msl::Options { lang_version: msl_version, ..Default::default() };
    msl::write_string(&module, &info, &mo, &msl::PipelineOptions::default()).map_err(|e| format!("MSL {msl_version:?}: {e}"))?;
    hlsl_out(&module, &info, hlsl::ShaderModel::V6_2)?;
    Ok(Outcome::Portable(msl_version))
}

fn hlsl_out(module: &naga::Module, info: &naga::valid::ModuleInfo, shader_model: hlsl::ShaderModel) -> Result<(), String> {
    let ho = hlsl::Options { shader_model, ..Default::default() };
    let mut out = String::new();
    hlsl::Writer::new(&mut out, &ho, &hlsl::PipelineOptions::default()).write(module, info, None).map(|_| ()).map_err(|e| format!("HLSL {shader_model:?}: {e}"))
}

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(dir) = args.next() else {
        eprintln!("usage: shader_portability DIR [MIN]");
        std::process::exit(2);
    };
    let min: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    let mut paths: Vec<_> = match std::fs::read_dir(&dir) {
        Ok(d) => d.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "wgsl")).collect(),
        Err(e) => {
            eprintln!("shader_portability: cannot read {dir}: {e}");
            std::process::exit(1);
        }
    };
    paths.sort();
    let (mut portable, mut coop, mut int64, mut failed) = (0, 0, 0, Vec::new());
    for p in &paths {
        let name = p.file_name().unwrap_or_default().to_string_lossy().into_owned();
        match std::fs::read_to_string(p).map_err(|e| e.to_string()).and_then(|src| check(&src)) {
            Ok(Outcome::Portable(_)) => portable += 1,
            Ok(Outcome::Coop) => coop += 1,
            Ok(Outcome::Int64) => int64 += 1,
            Err(e) => failed.push(format!("{name}: {e}")),
        }
    }
    println!(
        "shader_portability: {portable} kernels translate to MSL and HLSL 6.2, {int64} with 64-bit atomics to HLSL 6.6 (not Metal), {coop} on cooperative matrices (Vulkan only) not tried, {} failed",
        failed.len()
    );
    for f in &failed {
        println!("  {f}");
    }
    if !failed.is_empty() || portable < min {
        if portable < min {
            println!("shader_portability: fewer than {min} portable kernels in {dir}");
        }
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::{Outcome, check};

    fn kernel(header: &str, storage: &str, body: &str) -> String {
        format!("{header}\n@group(0) @binding(0) {storage} var<storage, read_write> b: array<f32>;\n@compute @workgroup_size(64)\nfn main(@builtin(local_invocation_index) l: u32) {{\n{body}\n}}\n")
    }

    #[test]
    fn plain_subgroup_and_coherent_kernels_translate() {
        assert_eq!(check(&kernel("", "", "b[l] = f32(l);")), Ok(Outcome::Portable((2, 4))));
        assert_eq!(check(&kernel("", "", "b[l] = subgroupAdd(b[l]);")), Ok(Outcome::Portable((2, 4))));
        assert_eq!(check(&kernel("", "", "b[l] = unpack2x16float(u32(l)).x;")), Ok(Outcome::Portable((2, 4))));
        // Coherent storage needs MSL 3.2, where wgpu offers it on Metal.
        assert_eq!(check(&kernel("", "@coherent", "b[l] = f32(l);")), Ok(Outcome::Portable((3, 2))));
    }

    #[test]
    fn cooperative_matrices_are_set_apart() {
        let coop = kernel("enable wgpu_cooperative_matrix;", "", "var m = coop_mat16x16<f32, C>();\ncoopStore(m, &b[0], 16u);");
        assert_eq!(check(&coop), Ok(Outcome::Coop));
    }

    #[test]
    fn int64_atomic_kernels_go_to_hlsl_6_6() {
        let src = "@group(0) @binding(0) var<storage, read_write> a: array<atomic<i64>>;\n@compute @workgroup_size(64)\nfn main(@builtin(local_invocation_index) l: u32) {\natomicAdd(&a[l], i64(l));\n}\n";
        assert_eq!(check(src), Ok(Outcome::Int64));
    }

    #[test]
    fn broken_or_unportable_kernels_fail() {
        assert!(check("fn main( {").is_err_and(|e| e.starts_with("parse")));
        // f64 is no capability the engine asks for.
        let f64_kernel = kernel("", "", "let d: f64 = f64(l);\nb[l] = f32(d);");
        assert!(check(&f64_kernel).is_err_and(|e| e.starts_with("validate")));
    }
}
