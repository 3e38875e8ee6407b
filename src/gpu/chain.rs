//! Chained dispatch: several dependent dispatches run as one, so a decode step pays the
//! ~5 µs a dispatch boundary costs (on the H100, `examples/chain_bench.rs`) once per chain
//! instead of once per step.
//!
//! Each stage is an ordinary kernel (opted in with `Kernels::get_chainable`), renamed into
//! its own namespace (`_s0`, `_s1`, …) and called from one entry point. A workgroup takes a
//! ticket from an atomic counter when it starts and runs the stage the ticket falls in, so
//! every workgroup of an earlier stage has started before any of a later one: a stage's
//! workgroups wait, spinning on the previous stage's arrival counter, only for workgroups
//! that are running, never for ones that would need their SM. Stages hand data over
//! through `@coherent` storage (loads that do not hit a per-SM cache a producer's store
//! bypassed), ordered by `storageBarrier` (a device-scope acquire-release fence) before
//! each arrival and after each wait. The last workgroup of the last stage resets the
//! counters for the next chain. A spin that runs past its bound counts itself in a
//! sticky word the tests read (`TIMEOUT_WORD`) and goes on, so a broken chain gives wrong
//! numbers, never a hung GPU.
//!
//! Bindings: 0 the stages' parameters side by side (each at a 16-byte boundary), 1 the
//! counters, then each stage's buffers in order. A buffer that any stage writes is bound
//! read-write and `@coherent` wherever it appears (a buffer may be bound several times in
//! one dispatch only if every binding is read-write).

use crate::{Error, Result};

use super::kernel::Access;

/// Counter words: ticket, one arrival counter per stage, the timeout word last.
pub const COUNTER_WORDS: usize = 64;
/// Most stages in one chain.
pub const MAX_STAGES: usize = COUNTER_WORDS - 2;
/// Word of the counter buffer that counts spins that hit their bound (never reset).
pub const TIMEOUT_WORD: usize = COUNTER_WORDS - 1;

/// What a chainable kernel's source says about itself.
#[derive(Clone)]
pub struct Form {
    pub code: String,
    pub entry: &'static str,
    pub buffers: Vec<Access>,
    /// Workgroup size (x; y and z must be 1).
    pub wg: u32,
}

/// One stage as the chain composer needs it.
pub struct StageSpec<'a> {
    pub name: &'a str,
    pub form: &'a Form,
    /// Grid x and y (z is 1).
    pub grid: [u32; 2],
    /// Parameter bytes this stage's uniform holds.
    pub param_bytes: usize,
    /// Per buffer: bound read-write and coherent in the chain.
    pub shared: Vec<bool>,
}

/// Bytes a stage's parameters take in the chain's uniform.
pub fn param_span(bytes: usize) -> usize {
    bytes.div_ceil(16) * 16
}

/// The form of a kernel if it can be a chain stage: a compute entry point whose workgroup
/// size is a number (or a `const` of the source), with only builtins as parameters, none of
/// which depends on the grid as a whole.
pub fn form(code: &str, entry: &'static str, buffers: &[Access]) -> Option<Form> {
    let toks = tokens(code);
    let at = toks.iter().position(|t| t.text == entry && t.prev_word == Some("fn"))?;
    let open = code[toks[at].end..].find('(')? + toks[at].end;
    let close = closing(code, open)?;
    // Parameters: every one must be a builtin this composer can pass on.
    for p in code[open + 1..close].split(',').filter(|p| !p.trim().is_empty()) {
        let b = builtin_of(p)?;
        if !PASSED.contains(&b) && b != "workgroup_id" {
            return None;
        }
    }
    let ws = code.find("@workgroup_size(")? + "@workgroup_size(".len();
    let arg = code[ws..ws + code[ws..].find(')')?].trim();
    let wg = match arg.trim_end_matches('u').parse::<u32>() {
        Ok(v) => v,
        Err(_) => const_value(code, arg)?,
    };
    Some(Form { code: code.to_string(), entry, buffers: buffers.to_vec(), wg })
}

/// Builtins a stage may take, passed on from the chain's entry point as they are.
const PASSED: [&str; 5] = ["local_invocation_index", "local_invocation_id", "subgroup_invocation_id", "subgroup_id", "num_subgroups"];

/// The index of the `)` that closes the `(` at `open`.
fn closing(code: &str, open: usize) -> Option<usize> {
    let mut depth = 0;
    for (i, c) in code[open..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(open + i);
                }
            }
            _ => {}
        }
    }
    None
}

fn builtin_of(param: &str) -> Option<&str> {
    let s = param.trim().strip_prefix("@builtin(")?;
    Some(s[..s.find(')')?].trim())
}

/// The value of `const NAME: u32 = <number>u;` in `code`.
fn const_value(code: &str, name: &str) -> Option<u32> {
    let pat = format!("const {name}: u32 = ");
    let s = &code[code.find(&pat)? + pat.len()..];
    s[..s.find(';')?].trim().trim_end_matches('u').parse().ok()
}

struct Tok<'a> {
    text: &'a str,
    start: usize,
    end: usize,
    /// The previous identifier-like word, if nothing but spaces and `<...>` lie between.
    prev_word: Option<&'a str>,
    /// The previous non-space character is a `.` (a member or swizzle).
    after_dot: bool,
    depth: usize,
}

/// Identifiers of `code` outside comments, with the brace depth each is at.
fn tokens(code: &str) -> Vec<Tok<'_>> {
    let b = code.as_bytes();
    let mut out: Vec<Tok> = Vec::new();
    let (mut i, mut depth) = (0, 0usize);
    let mut last_word: Option<&str> = None;
    let mut last_char = b' ';
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if c.is_ascii_alphabetic() || c == b'_' {
            let s = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            let text = &code[s..i];
            out.push(Tok { text, start: s, end: i, prev_word: last_word, after_dot: last_char == b'.', depth });
            last_word = Some(text);
            last_char = b'a';
            // `var<storage, read> name`: the name's previous word is `var`.
            if text == "var" {
                let mut j = i;
                while j < b.len() && b[j].is_ascii_whitespace() {
                    j += 1;
                }
                if b.get(j) == Some(&b'<') {
                    i = j + code[j..].find('>').map_or(b.len() - j, |e| e + 1);
                }
            }
            continue;
        }
        if c.is_ascii_digit() {
            // A number (with its suffix) is no identifier.
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.') {
                i += 1;
            }
            last_word = None;
            last_char = b'0';
            continue;
        }
        match c {
            b'{' => depth += 1,
            b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        if !c.is_ascii_whitespace() {
            last_word = None;
            last_char = c;
        }
        i += 1;
    }
    out
}

/// Rewrite one stage's source into namespace `_s{k}`: every top-level name gets the
/// suffix, the uniform becomes `cp.s{k}`, its bindings move to `base + b` (promoted to
/// read-write and coherent where `shared`), the entry point loses its attributes.
/// Returns the code and the entry's builtins in parameter order.
fn namespaced(spec: &StageSpec, k: usize, base: u32) -> Result<(String, Vec<String>)> {
    let code = &spec.form.code;
    let toks = tokens(code);
    let bad = |what: &str| Error::Gpu(format!("kernel {} cannot be chained: {what}", spec.name));
    let mut names = std::collections::HashSet::new();
    for t in &toks {
        if t.depth == 0 && matches!(t.prev_word, Some("fn" | "const" | "var" | "struct" | "alias" | "override")) {
            names.insert(t.text);
        }
    }
    // The uniform's name and its binding declaration (removed).
    let uni = code.find("var<uniform>").ok_or_else(|| bad("no uniform"))?;
    let uni_name = toks.iter().find(|t| t.start > uni).ok_or_else(|| bad("no uniform name"))?.text;
    let suffix = format!("_s{k}");
    let mut out = String::with_capacity(code.len() + 1024);
    let mut last = 0;
    for t in &toks {
        if t.after_dot || !names.contains(t.text) {
            continue;
        }
        out.push_str(&code[last..t.start]);
        if t.text == uni_name {
            out.push_str(&format!("cp.s{k}"));
        } else {
            out.push_str(t.text);
            out.push_str(&suffix);
        }
        last = t.end;
    }
    out.push_str(&code[last..]);

    // Declarations: drop the uniform, renumber and promote the storage bindings.
    let mut code = String::with_capacity(out.len());
    let mut rest = out.as_str();
    while let Some(at) = rest.find("@group(0)") {
        code.push_str(&rest[..at]);
        let decl_end = rest[at..].find(';').ok_or_else(|| bad("unterminated binding"))? + at + 1;
        let decl = &rest[at..decl_end];
        let num = decl.find("@binding(").map(|i| &decl[i + 9..]).and_then(|s| s[..s.find(')')?].trim().parse::<usize>().ok());
        let b = num.ok_or_else(|| bad("binding without a number"))?;
        if b > 0 {
            let shared = *spec.shared.get(b - 1).ok_or_else(|| bad("binding past its buffers"))?;
            let var = decl.find("var<").ok_or_else(|| bad("binding is not a var"))?;
            let close = decl[var..].find('>').ok_or_else(|| bad("unclosed var<>"))? + var;
            let tail = &decl[close + 1..];
            let space = if shared { "@coherent var<storage, read_write>".to_string() } else { decl[var..=close].to_string() };
            code.push_str(&format!("@group(0) @binding({}) {space}{tail}", base + b as u32));
        }
        rest = &rest[decl_end..];
    }
    code.push_str(rest);

    // The entry point: no attributes, builtins as plain parameters.
    let entry = format!("fn {}{suffix}(", spec.form.entry);
    let at = code.find(&entry).ok_or_else(|| bad("entry point not found"))?;
    let open = at + entry.len() - 1;
    let close = closing(&code, open).ok_or_else(|| bad("entry parameters"))?;
    let mut builtins = Vec::new();
    let mut params = Vec::new();
    for p in code[open + 1..close].split(',').filter(|p| !p.trim().is_empty()) {
        let b = builtin_of(p).ok_or_else(|| bad("entry parameter is not a builtin"))?;
        builtins.push(b.to_string());
        let p = p.trim();
        params.push(p[p.find(')').expect("builtin attribute") + 1..].trim().to_string());
    }
    let head = code[..at].rfind("@compute").ok_or_else(|| bad("no @compute"))?;
    let code = format!("{}fn {}{suffix}({}){}", &code[..head], spec.form.entry, params.join(", "), &code[close + 1..]);
    Ok((code, builtins))
}

/// WGSL of a chain of `stages` (at least two), and its buffers' access after the counter.
pub fn compose(stages: &[StageSpec]) -> Result<(String, Vec<Access>)> {
    if stages.len() < 2 || stages.len() > MAX_STAGES {
        return Err(Error::Gpu(format!("a chain takes 2..{MAX_STAGES} stages, not {}", stages.len())));
    }
    let wg = stages[0].form.wg;
    let mut enables = Vec::new();
    let mut bodies = String::new();
    let mut access = Vec::new();
    let mut base = 1u32;
    let mut calls = String::new();
    let mut fields = String::new();
    let mut builtins_all: Vec<String> = Vec::new();
    let mut end = 0u32;
    for (k, s) in stages.iter().enumerate() {
        if s.form.wg != wg {
            return Err(Error::Gpu(format!("chain stages differ in workgroup size ({} and {wg})", s.form.wg)));
        }
        let (code, builtins) = namespaced(s, k, base)?;
        // `enable` directives go first, once.
        let mut body = String::new();
        for line in code.lines() {
            if line.trim_start().starts_with("enable ") {
                if !enables.contains(&line.trim().to_string()) {
                    enables.push(line.trim().to_string());
                }
            } else {
                body.push_str(line);
                body.push('\n');
            }
        }
        bodies.push_str(&format!("// ---- stage {k}: {}\n{body}\n", s.name));
        for (a, &shared) in s.form.buffers.iter().zip(&s.shared) {
            access.push(if shared { Access::ReadWrite } else { *a });
        }
        base += s.form.buffers.len() as u32;
        let uni = uniform_type(&s.form.code).ok_or_else(|| Error::Gpu(format!("kernel {} has no uniform type", s.name)))?;
        fields.push_str(&format!("    @size({}) s{k}: {uni}_s{k},\n", param_span(s.param_bytes)));
        let n = s.grid[0] * s.grid[1];
        let start = end;
        end += n;
        let args: Vec<String> = builtins
            .iter()
            .map(|b| match b.as_str() {
                "workgroup_id" => format!("vec3<u32>((t - {start}u) % {gx}u, (t - {start}u) / {gx}u, 0u)", gx = s.grid[0]),
                other => format!("chain_{other}"),
            })
            .collect();
        for b in &builtins {
            if b != "workgroup_id" && !builtins_all.contains(b) {
                builtins_all.push(b.clone());
            }
        }
        let wait = if k == 0 { String::new() } else { format!("chain_wait({}u, {}u, chain_local_invocation_index);\n        ", k - 1, stages[k - 1].grid[0] * stages[k - 1].grid[1]) };
        let last = k + 1 == stages.len();
        calls.push_str(&format!(
            "    if (t < {end}u) {{\n        {wait}{}_s{k}({});\n        chain_arrive({k}u, {n}u, {last}, chain_local_invocation_index);\n        return;\n    }}\n",
            s.form.entry,
            args.join(", ")
        ));
    }
    if !builtins_all.iter().any(|b| b == "local_invocation_index") {
        builtins_all.push("local_invocation_index".into());
    }
    let types = |b: &str| if b == "local_invocation_id" { "vec3<u32>" } else { "u32" };
    let params: Vec<String> = builtins_all.iter().map(|b| format!("@builtin({b}) chain_{b}: {}", types(b))).collect();
    let stages_n = stages.len();
    let code = format!(
        "{enables}\n{bodies}
// ---- the chain
struct ChainParams {{
{fields}}}
@group(0) @binding(0) var<uniform> cp: ChainParams;
@group(0) @binding(1) var<storage, read_write> chain_ctr: array<atomic<u32>, {COUNTER_WORDS}>;
var<workgroup> chain_ticket: u32;

// Wait until all `n` workgroups of stage `s` have arrived.
fn chain_wait(s: u32, n: u32, lid: u32) {{
    if (lid == 0u) {{
        var done = false;
        for (var i = 0u; i < {SPIN_BOUND}u; i++) {{
            if (atomicLoad(&chain_ctr[1u + s]) >= n) {{
                done = true;
                break;
            }}
        }}
        if (!done) {{
            atomicAdd(&chain_ctr[{TIMEOUT_WORD}u], 1u);
        }}
    }}
    storageBarrier();
}}

// Count this workgroup in stage `s` (of `n`); the last of the last stage resets the counters.
fn chain_arrive(s: u32, n: u32, last: bool, lid: u32) {{
    storageBarrier();
    if (lid == 0u) {{
        let c = atomicAdd(&chain_ctr[1u + s], 1u);
        if (last && c + 1u == n) {{
            for (var i = 0u; i <= {stages_n}u; i++) {{
                atomicStore(&chain_ctr[i], 0u);
            }}
        }}
    }}
}}

@compute @workgroup_size({wg})
fn chain_main({params}) {{
    if (chain_local_invocation_index == 0u) {{
        chain_ticket = atomicAdd(&chain_ctr[0], 1u);
    }}
    let t = workgroupUniformLoad(&chain_ticket);
{calls}}}
",
        enables = enables.join("\n"),
        params = params.join(", "),
    );
    let mut all = vec![Access::ReadWrite];
    all.extend(access);
    Ok((code, all))
}

/// Spins a waiting workgroup makes before it counts a timeout and goes on (far beyond any
/// stage of a decode step: ~10^8 loads from L2).
const SPIN_BOUND: u32 = 1 << 27;

/// The type name of a source's uniform (`var<uniform> p: Params;` gives `Params`).
fn uniform_type(code: &str) -> Option<&str> {
    let at = code.find("var<uniform>")?;
    let s = &code[at..];
    let colon = s.find(':')?;
    let semi = s.find(';')?;
    Some(s[colon + 1..semi].trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "const WG: u32 = 64u;\nstruct P { n: u32, x: u32 }\n@group(0) @binding(0) var<uniform> p: P;\n@group(0) @binding(1) var<storage, read> a: array<f32>;\n@group(0) @binding(2) var<storage, read_write> b: array<f32>;\nvar<workgroup> s: array<f32, WG>;\nfn f(v: vec2<f32>) -> f32 { return v.x + f32(p.x); }\n@compute @workgroup_size(WG)\nfn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {\n    // a comment naming b and p\n    b[wg.x] = f(vec2<f32>(a[lid], 1.0)) + s[0];\n}\n";

    #[test]
    fn form_reads_the_workgroup_size_and_builtins() {
        let f = form(SRC, "main", &[Access::Read, Access::ReadWrite]).expect("chainable");
        assert_eq!(f.wg, 64);
        let bad = SRC.replace("@builtin(workgroup_id) wg: vec3<u32>", "@builtin(num_workgroups) wg: vec3<u32>");
        assert!(form(&bad, "main", &[Access::Read, Access::ReadWrite]).is_none());
    }

    #[test]
    fn stages_are_renamed_apart() {
        let f = form(SRC, "main", &[Access::Read, Access::ReadWrite]).unwrap();
        let spec = |shared: Vec<bool>| StageSpec { name: "t", form: &f, grid: [3, 1], param_bytes: 8, shared };
        let (code, access) = compose(&[spec(vec![false, true]), spec(vec![true, true])]).unwrap();
        assert_eq!(access, [Access::ReadWrite, Access::Read, Access::ReadWrite, Access::ReadWrite, Access::ReadWrite]);
        for want in ["fn f_s1(v: vec2<f32>)", "v.x + f32(cp.s1.x)", "@group(0) @binding(2) var<storage, read> a_s0", "@group(0) @binding(3) @coherent var<storage, read_write> b_s0", "@group(0) @binding(4) @coherent var<storage, read_write> a_s1", "fn main_s0(wg: vec3<u32>, lid: u32)", "@size(16) s1: P_s1", "var<workgroup> s_s1: array<f32, WG_s1>"] {
            assert!(code.contains(want), "missing {want:?} in\n{code}");
        }
        assert!(code.contains("a comment naming b and p"), "comments are left alone");
        // The workgroups of stage 1 are tickets 3..6 and wait for the 3 of stage 0.
        assert!(code.contains("if (t < 6u)") && code.contains("chain_wait(0u, 3u"), "{code}");
        assert!(!code.contains("var<uniform> p"), "stage uniforms are gone");
    }
}
