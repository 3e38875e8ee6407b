//! Timing-only probes: `RULLAMA_PROBE=FILE` rewrites the composed source of every kernel
//! before it is compiled, so a bound (work taken out, results wrong) needs no build of its
//! own and can alternate with the unchanged engine in one command (docs/performance.md,
//! "Rules for measuring"). FILE holds blocks of lines
//!
//! ```text
//! @@FROM
//! exact text of the kernel source, whole lines
//! @@TO
//! what replaces it (may be empty)
//! @@END
//! ```
//!
//! and each kernel whose source holds a FROM text gets every occurrence replaced, in the
//! file's order; stderr names each kernel a probe changed.

use crate::{Error, Result};

/// One substitution of a probe file.
#[derive(Debug, PartialEq)]
pub struct Rewrite {
    pub from: String,
    pub to: String,
}

/// The blocks of a probe file, or what is wrong with it.
pub fn parse(text: &str) -> Result<Vec<Rewrite>> {
    let bad = |line: usize, what: &str| Error::Input(format!("probe file, line {line}: {what}"));
    let (mut out, mut from, mut to) = (Vec::new(), None::<String>, None::<String>);
    for (n, line) in text.lines().enumerate().map(|(n, l)| (n + 1, l)) {
        match (line, &mut from, &mut to) {
            ("@@FROM", None, None) => from = Some(String::new()),
            ("@@TO", Some(_), None) => to = Some(String::new()),
            ("@@END", Some(_), Some(_)) => {
                let (f, t) = (from.take().unwrap_or_default(), to.take().unwrap_or_default());
                if f.is_empty() {
                    return Err(bad(n, "a block with nothing to replace"));
                }
                out.push(Rewrite { from: f, to: t });
            }
            ("@@FROM" | "@@TO" | "@@END", _, _) => return Err(bad(n, &format!("{line} out of place"))),
            (_, _, Some(t)) | (_, Some(t), None) => {
                t.push_str(line);
                t.push('\n');
            }
            (_, None, None) if line.trim().is_empty() => {}
            (_, None, None) => return Err(bad(n, "text outside a block")),
        }
    }
    if from.is_some() {
        return Err(bad(text.lines().count(), "the last block has no @@END"));
    }
    Ok(out)
}

/// `code` with every rewrite applied, or None where none matched.
pub fn apply(code: &str, rewrites: &[Rewrite]) -> Option<String> {
    let mut out = None::<String>;
    for r in rewrites {
        let cur = out.as_deref().unwrap_or(code);
        if cur.contains(&r.from) {
            out = Some(cur.replace(&r.from, &r.to));
        }
    }
    out
}

/// The rewrites `RULLAMA_PROBE` names, read once (none when it is unset).
pub fn from_env() -> Result<&'static [Rewrite]> {
    static PROBE: std::sync::OnceLock<std::result::Result<Vec<Rewrite>, String>> = std::sync::OnceLock::new();
    let p = PROBE.get_or_init(|| match std::env::var_os("RULLAMA_PROBE") {
        None => Ok(Vec::new()),
        Some(path) => std::fs::read_to_string(&path)
            .map_err(|e| format!("RULLAMA_PROBE: cannot read {}: {e}", path.to_string_lossy()))
            .and_then(|t| parse(&t).map_err(|e| format!("RULLAMA_PROBE {}: {e}", path.to_string_lossy()))),
    });
    p.as_deref().map_err(|e| Error::Input(e.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_parse_and_apply_in_order() {
        let r = parse("@@FROM\n    let a = f(x);\n@@TO\n    let a = 0.0;\n@@END\n\n@@FROM\n    let a = 0.0;\n    b();\n@@TO\n@@END\n").unwrap();
        assert_eq!(r, vec![Rewrite { from: "    let a = f(x);\n".into(), to: "    let a = 0.0;\n".into() }, Rewrite { from: "    let a = 0.0;\n    b();\n".into(), to: String::new() }]);
        // The second block sees the first one's result; a kernel without the text is untouched.
        assert_eq!(apply("fn g() {\n    let a = f(x);\n    b();\n}\n", &r).as_deref(), Some("fn g() {\n}\n"));
        assert_eq!(apply("fn h() {}\n", &r), None);
    }

    #[test]
    fn malformed_files_are_errors() {
        for (text, line) in [("@@FROM\nx\n", "line 2"), ("@@TO\nx\n@@END\n", "line 1"), ("x\n", "line 1"), ("@@FROM\n@@TO\n@@END\n", "line 3"), ("@@FROM\nx\n@@END\n", "line 3")] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(line), "{text:?}: {e}");
        }
    }
}
