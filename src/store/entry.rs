//! A catalog entry (`ModelEntry`) and the facts it shows, read from the GGUF header and,
//! for Ollama models, the config blob.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use serde::Serialize;

use super::ollama::ModelConfig;
use super::status::{Problem, Status};
use crate::gguf::types::file_type_name;
use crate::gguf::{GgmlType, Gguf, GgufFile};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// A manifest in an Ollama store.
    Ollama,
    /// A file in the imported-models list.
    Imported,
    /// A file named directly by path, not in the catalog.
    File,
}

/// One model as listed (`rullama list --json` prints these).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelEntry {
    pub name: String,
    pub source: Source,
    /// The GGUF file (for Ollama models, the model blob).
    pub path: Option<PathBuf>,
    /// The Ollama manifest this entry comes from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub manifest: Option<PathBuf>,
    /// Ollama's `model_family`, else the GGUF architecture.
    pub family: Option<String>,
    /// `general.architecture`.
    pub architecture: Option<String>,
    /// Sum of the elements of every tensor in the GGUF (towers and projectors included).
    pub parameters: Option<u64>,
    /// `parameters` for people, e.g. "268M" or "4.6B".
    pub parameter_size: Option<String>,
    pub quantization: Option<String>,
    /// Bytes of the GGUF file.
    pub size: Option<u64>,
    pub context_length: Option<u64>,
    pub capabilities: Vec<String>,
    /// Seconds since the Unix epoch of the manifest (Ollama) or the file (imported).
    pub modified: Option<u64>,
    pub status: Status,
}

impl ModelEntry {
    pub(crate) fn new(name: String, source: Source) -> ModelEntry {
        ModelEntry {
            name,
            source,
            path: None,
            manifest: None,
            family: None,
            architecture: None,
            parameters: None,
            parameter_size: None,
            quantization: None,
            size: None,
            context_length: None,
            capabilities: Vec::new(),
            modified: None,
            status: Status::Ok,
        }
    }

    /// Record `problem` unless an earlier one was already recorded.
    pub(crate) fn flag(&mut self, problem: Problem) {
        if self.status.is_ok() {
            self.status = Status::Broken(problem);
        }
    }

    /// Fill the facts from the GGUF at `path`, the config blob and the manifest's other
    /// layers. A GGUF that does not parse marks the entry broken.
    pub(crate) fn describe(&mut self, path: &Path, config: Option<&ModelConfig>, has_projector: bool) {
        self.path = Some(path.to_path_buf());
        self.size = std::fs::metadata(path).ok().map(|m| m.len());
        let facts = match GgufFile::open(path) {
            Ok(f) => Some(GgufFacts::of(&f.gguf)),
            Err(e) => {
                self.flag(Problem::CorruptGguf { detail: e.to_string() });
                None
            }
        };
        let facts = facts.as_ref();
        self.architecture = facts.and_then(|f| f.architecture.clone());
        self.family = config.and_then(|c| c.model_family.clone()).or_else(|| self.architecture.clone());
        self.parameters = facts.map(|f| f.parameters);
        self.parameter_size = self.parameters.map(human_count);
        self.quantization = facts
            .and_then(|f| f.file_type.clone())
            .or_else(|| config.and_then(|c| c.file_type.clone()))
            .or_else(|| facts.and_then(|f| f.dominant_type.map(|t| t.name().to_string())));
        self.context_length = facts.and_then(|f| f.context_length).or_else(|| config.and_then(|c| c.context_length));
        self.capabilities = capabilities(facts, self.family.as_deref(), has_projector, config);
    }
}

/// What the GGUF header says about a model.
#[derive(Debug, Clone, PartialEq)]
pub struct GgufFacts {
    pub architecture: Option<String>,
    pub parameters: u64,
    /// Name of `general.file_type`, when it is one llama.cpp names.
    pub file_type: Option<String>,
    /// The quantized type holding the most elements, else the type holding the most.
    pub dominant_type: Option<GgmlType>,
    pub context_length: Option<u64>,
    pub vision: bool,
    pub audio: bool,
    pub moe: bool,
}

impl GgufFacts {
    pub fn of(g: &Gguf) -> GgufFacts {
        let arch = g.architecture().unwrap_or("");
        let key_u64 = |suffix: &str| g.get(&format!("{arch}.{suffix}")).and_then(|v| v.as_u64());
        let has_prefix = |p: &str| g.tensors.iter().any(|t| t.name.starts_with(p));

        let mut by_type: HashMap<GgmlType, u64> = HashMap::new();
        for t in &g.tensors {
            *by_type.entry(t.ty).or_default() += t.n_elements;
        }
        // Ties go to the lower type id, so the answer does not depend on hash order.
        let most = |quantized_only: bool| {
            by_type
                .iter()
                .filter(|(t, _)| !quantized_only || t.block_elems() > 1)
                .max_by_key(|(t, n)| (**n, std::cmp::Reverse(t.id())))
                .map(|(t, _)| *t)
        };

        GgufFacts {
            architecture: g.architecture().map(str::to_string),
            parameters: g.tensors.iter().fold(0u64, |acc, t| acc.saturating_add(t.n_elements)),
            file_type: g.get_u32("general.file_type").and_then(file_type_name).map(str::to_string),
            dominant_type: most(true).or_else(|| most(false)),
            context_length: key_u64("context_length"),
            vision: key_u64("vision.block_count").is_some_and(|n| n > 0) || has_prefix("v."),
            audio: key_u64("audio.block_count").is_some_and(|n| n > 0) || has_prefix("a."),
            moe: key_u64("expert_count").is_some_and(|n| n > 0),
        }
    }
}

/// `text` always, then what the weights show, then the config blob's own list (deduplicated).
fn capabilities(
    facts: Option<&GgufFacts>,
    family: Option<&str>,
    has_projector: bool,
    config: Option<&ModelConfig>,
) -> Vec<String> {
    let arch = facts.and_then(|f| f.architecture.as_deref()).or(family);
    let derived = [
        ("text", true),
        ("vision", has_projector || facts.is_some_and(|f| f.vision)),
        ("audio", facts.is_some_and(|f| f.audio)),
        ("moe", facts.is_some_and(|f| f.moe)),
        ("thinking", arch == Some("gemma4")),
    ];
    let mut caps: Vec<String> = derived.iter().filter(|(_, on)| *on).map(|(c, _)| c.to_string()).collect();
    for c in config.and_then(|c| c.capabilities.as_ref()).into_iter().flatten() {
        if !caps.contains(c) {
            caps.push(c.clone());
        }
    }
    caps
}

/// A count for people: three significant digits at most, one decimal below ten
/// (268_098_176 → "268M", 4_600_000_000 → "4.6B").
pub fn human_count(n: u64) -> String {
    const UNITS: [(f64, &str); 4] = [(1e3, "K"), (1e6, "M"), (1e9, "B"), (1e12, "T")];
    let Some(mut i) = UNITS.iter().rposition(|(scale, _)| n as f64 >= *scale) else {
        return n.to_string();
    };
    let mut v = n as f64 / UNITS[i].0;
    // 999.7M would print as "1000M"; it reads better as "1.0B".
    if v >= 999.5 && i + 1 < UNITS.len() {
        i += 1;
        v /= 1000.0;
    }
    if v < 9.95 { format!("{v:.1}{}", UNITS[i].1) } else { format!("{v:.0}{}", UNITS[i].1) }
}

/// Modification time of `path` in seconds since the Unix epoch.
pub(crate) fn modified_secs(path: &Path) -> Option<u64> {
    let t = std::fs::metadata(path).ok()?.modified().ok()?;
    t.duration_since(UNIX_EPOCH).ok().map(|d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::human_count;

    #[test]
    fn human_counts() {
        for (n, s) in [
            (0, "0"),
            (999, "999"),
            (1_000, "1.0K"),
            (268_098_176, "268M"),
            (4_600_000_000, "4.6B"),
            (9_940_000_000, "9.9B"),
            (9_960_000_000, "10B"),
            (26_000_000_000, "26B"),
            (999_700_000, "1.0B"),
            (12_345, "12K"),
        ] {
            assert_eq!(human_count(n), s, "{n}");
        }
    }
}
