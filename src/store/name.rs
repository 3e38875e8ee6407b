//! Ollama model names: `[host/][namespace/]model[:tag]`, with Ollama's defaults and its
//! shortest display form.

use std::fmt;

pub const DEFAULT_HOST: &str = "registry.ollama.ai";
pub const DEFAULT_NAMESPACE: &str = "library";
pub const DEFAULT_TAG: &str = "latest";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelName {
    pub host: String,
    pub namespace: String,
    pub model: String,
    pub tag: String,
}

impl ModelName {
    /// Parse a user-typed name, filling Ollama's defaults. `None` if it is not name-shaped.
    pub fn parse(s: &str) -> Option<ModelName> {
        // Ollama accepts a scheme prefix (`https://host/ns/model`); it carries no meaning here.
        let s = s.split_once("://").map_or(s, |(_, rest)| rest);
        // The tag separator is a ':' after the last '/' (a ':' before it is a host's port).
        let (path, tag) = match s.rfind(':') {
            Some(i) if s[i..].find('/').is_none() => (&s[..i], Some(&s[i + 1..])),
            _ => (s, None),
        };
        let parts: Vec<&str> = path.split('/').collect();
        let (host, namespace, model) = match parts.as_slice() {
            [m] => (DEFAULT_HOST, DEFAULT_NAMESPACE, *m),
            [n, m] => (DEFAULT_HOST, *n, *m),
            [h, n, m] => (*h, *n, *m),
            _ => return None,
        };
        let tag = tag.unwrap_or(DEFAULT_TAG);
        let name = ModelName { host: host.into(), namespace: namespace.into(), model: model.into(), tag: tag.into() };
        name.is_valid().then_some(name)
    }

    /// Each part is non-empty and cannot act as a path component other than itself.
    fn is_valid(&self) -> bool {
        [&self.host, &self.namespace, &self.model, &self.tag]
            .iter()
            .all(|p| !p.is_empty() && *p != "." && *p != ".." && !p.contains(['/', '\\', '\0']))
    }

    pub fn from_parts(host: &str, namespace: &str, model: &str, tag: &str) -> ModelName {
        ModelName { host: host.into(), namespace: namespace.into(), model: model.into(), tag: tag.into() }
    }

    /// Ollama compares names case-insensitively.
    pub fn matches(&self, other: &ModelName) -> bool {
        self.host.eq_ignore_ascii_case(&other.host)
            && self.namespace.eq_ignore_ascii_case(&other.namespace)
            && self.model.eq_ignore_ascii_case(&other.model)
            && self.tag.eq_ignore_ascii_case(&other.tag)
    }
}

/// Ollama's shortest form: `model:tag` in the default namespace of the default host,
/// `namespace/model:tag` on the default host, else `host/namespace/model:tag`.
impl fmt::Display for ModelName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.host.eq_ignore_ascii_case(DEFAULT_HOST) {
            write!(f, "{}/{}/", self.host, self.namespace)?;
        } else if !self.namespace.eq_ignore_ascii_case(DEFAULT_NAMESPACE) {
            write!(f, "{}/", self.namespace)?;
        }
        write!(f, "{}:{}", self.model, self.tag)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_fills_defaults() {
        let n = ModelName::parse("gemma4").unwrap();
        assert_eq!(n, ModelName::from_parts(DEFAULT_HOST, DEFAULT_NAMESPACE, "gemma4", "latest"));
        let n = ModelName::parse("me/gemma4:e2b").unwrap();
        assert_eq!(n, ModelName::from_parts(DEFAULT_HOST, "me", "gemma4", "e2b"));
    }

    #[test]
    fn port_colon_is_not_a_tag() {
        let n = ModelName::parse("localhost:8080/ns/m").unwrap();
        assert_eq!(n, ModelName::from_parts("localhost:8080", "ns", "m", "latest"));
        let n = ModelName::parse("https://localhost:8080/ns/m:q4").unwrap();
        assert_eq!(n, ModelName::from_parts("localhost:8080", "ns", "m", "q4"));
    }

    #[test]
    fn rejects_non_names() {
        for s in ["", "a/b/c/d", "a:", ":t", "../m", "ns//m", "./x.gguf"] {
            assert!(ModelName::parse(s).is_none(), "{s:?}");
        }
    }

    #[test]
    fn display_shortest() {
        assert_eq!(ModelName::from_parts(DEFAULT_HOST, DEFAULT_NAMESPACE, "gemma4", "e2b").to_string(), "gemma4:e2b");
        assert_eq!(ModelName::from_parts(DEFAULT_HOST, "me", "g", "t").to_string(), "me/g:t");
        assert_eq!(ModelName::from_parts("hf.co", "unsloth", "g", "t").to_string(), "hf.co/unsloth/g:t");
    }
}
