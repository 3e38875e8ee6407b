//! Ollama's on-disk store: root discovery, manifests, layers and blobs.
//!
//! Layout (gemma4_spec.md §1): `<root>/manifests/<host>/<namespace>/<model>/<tag>` holds a
//! JSON manifest whose layers name blobs at `<root>/blobs/sha256-<hex>`. The store is only
//! read: nothing is ever written, copied or moved here.

use std::ffi::OsString;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};

use super::name::ModelName;
use super::status::Problem;

/// Where the Linux install script's `ollama` service user keeps its models.
pub const SERVICE_ROOT: &str = "/usr/share/ollama/.ollama/models";

/// Manifests are small JSON; even safetensors manifests with one layer per tensor stay far
/// below this. The cap keeps a hostile file from being read whole into memory.
const MANIFEST_CAP: u64 = 16 << 20;
const CONFIG_CAP: u64 = 1 << 20;

/// The inputs of root discovery, gathered in one place so tests can supply their own
/// instead of the process environment and the real home directory.
#[derive(Debug, Clone, Default)]
pub struct RootEnv {
    /// The value of `OLLAMA_MODELS`.
    pub ollama_models: Option<OsString>,
    pub home: Option<PathBuf>,
    /// The system service's store, used when it is readable.
    pub service_root: Option<PathBuf>,
}

impl RootEnv {
    pub fn from_system() -> RootEnv {
        RootEnv {
            ollama_models: std::env::var_os("OLLAMA_MODELS"),
            home: directories::BaseDirs::new().map(|b| b.home_dir().to_path_buf()),
            service_root: cfg!(target_os = "linux").then(|| PathBuf::from(SERVICE_ROOT)),
        }
    }

    /// Candidate roots, most preferred first. The user's root is listed even when it does
    /// not exist yet (scanning skips it); the service root only when it can be read.
    pub fn roots(&self) -> Vec<PathBuf> {
        let mut roots = Vec::new();
        match self.ollama_models.as_ref().filter(|v| !v.is_empty()) {
            Some(dir) => roots.push(PathBuf::from(dir)),
            None => roots.extend(self.home.as_ref().map(|h| h.join(".ollama").join("models"))),
        }
        if let Some(service) = &self.service_root
            && fs::read_dir(service).is_ok()
            && !roots.iter().any(|r| same_path(r, service))
        {
            roots.push(service.clone());
        }
        roots
    }
}

fn same_path(a: &Path, b: &Path) -> bool {
    match (fs::canonicalize(a), fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// One layer (or the config) of a manifest.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct Layer {
    #[serde(rename = "mediaType")]
    pub media_type: String,
    pub digest: String,
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// Tensor or file name, used by safetensors manifests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl Layer {
    pub fn kind(&self) -> LayerKind {
        LayerKind::from_media_type(&self.media_type)
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    #[serde(default)]
    pub schema_version: u32,
    #[serde(default)]
    pub media_type: String,
    #[serde(default)]
    pub config: Option<Layer>,
    #[serde(default)]
    pub layers: Vec<Layer>,
}

impl Manifest {
    pub fn layers_of(&self, kind: LayerKind) -> impl Iterator<Item = &Layer> {
        self.layers.iter().filter(move |l| l.kind() == kind)
    }

    /// The GGUF model layer. Ollama lets a later model layer replace an earlier one.
    pub fn model_layer(&self) -> Option<&Layer> {
        self.layers_of(LayerKind::Model).last()
    }
}

/// `application/vnd.ollama.image.<kind>` layer types rullama acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerKind {
    Model,
    Projector,
    Adapter,
    Template,
    System,
    Params,
    Messages,
    License,
    Other,
}

impl LayerKind {
    pub fn from_media_type(media_type: &str) -> LayerKind {
        match media_type.strip_prefix("application/vnd.ollama.image.") {
            Some("model") => LayerKind::Model,
            Some("projector") => LayerKind::Projector,
            Some("adapter") => LayerKind::Adapter,
            Some("template") => LayerKind::Template,
            Some("system") => LayerKind::System,
            Some("params") => LayerKind::Params,
            Some("messages") => LayerKind::Messages,
            Some("license") => LayerKind::License,
            _ => LayerKind::Other,
        }
    }
}

/// A blob digest, accepted only as `sha256[:-]<64 hex>`: anything else (another algorithm,
/// a wrong length, path characters) is refused before it can become a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Digest {
    hex: String,
}

impl Digest {
    pub fn parse(s: &str) -> Option<Digest> {
        let hex = s.strip_prefix("sha256:").or_else(|| s.strip_prefix("sha256-"))?;
        (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then(|| Digest { hex: hex.to_string() })
    }

    /// The blob's file name: Ollama replaces the `:` with `-`.
    pub fn file_name(&self) -> String {
        format!("sha256-{}", self.hex)
    }
}

/// Ollama's config blob (`ConfigV2`). Every field is optional and a field of an unexpected
/// type reads as absent, so a newer Ollama adding or changing fields cannot hide a model.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct ModelConfig {
    #[serde(default, deserialize_with = "lenient")]
    pub model_format: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub model_family: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub model_families: Option<Vec<String>>,
    /// Human parameter count, e.g. "4.3B".
    #[serde(default, deserialize_with = "lenient")]
    pub model_type: Option<String>,
    /// Quantization name, e.g. "Q4_K_M".
    #[serde(default, deserialize_with = "lenient")]
    pub file_type: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub architecture: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub capabilities: Option<Vec<String>>,
    #[serde(default, deserialize_with = "lenient")]
    pub context_length: Option<u64>,
    #[serde(default, deserialize_with = "lenient")]
    pub embedding_length: Option<u64>,
    #[serde(default, deserialize_with = "lenient")]
    pub renderer: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub parser: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub requires: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub base_name: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub remote_host: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub remote_model: Option<String>,
}

fn lenient<'de, D: Deserializer<'de>, T: DeserializeOwned>(d: D) -> Result<Option<T>, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    Ok(T::deserialize(v).ok())
}

/// A manifest found on disk, with the name its path spells.
#[derive(Debug, Clone)]
pub struct ManifestRef {
    pub name: ModelName,
    pub path: PathBuf,
}

/// One Ollama models root, opened for reading.
#[derive(Debug, Clone)]
pub struct OllamaStore {
    root: PathBuf,
    /// The root with every symlink resolved: blobs must resolve to somewhere below it.
    canonical_root: PathBuf,
}

impl OllamaStore {
    /// Open `root`; `Ok(None)` when it does not exist (no Ollama store there).
    pub fn open(root: &Path) -> std::io::Result<Option<OllamaStore>> {
        match fs::canonicalize(root) {
            Ok(canonical_root) if canonical_root.is_dir() => {
                Ok(Some(OllamaStore { root: root.to_path_buf(), canonical_root }))
            }
            Ok(_) => Err(std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a directory")),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Every manifest under `manifests/<host>/<namespace>/<model>/<tag>`, for all hosts,
    /// sorted by path. Directories that cannot be read are reported in `warnings`.
    pub fn manifests(&self, warnings: &mut Vec<String>) -> Vec<ManifestRef> {
        let mut found = Vec::new();
        let top = self.root.join("manifests");
        if !top.exists() {
            return found;
        }
        for (host, host_dir) in children(&top, true, warnings) {
            for (namespace, ns_dir) in children(&host_dir, true, warnings) {
                for (model, model_dir) in children(&ns_dir, true, warnings) {
                    for (tag, path) in children(&model_dir, false, warnings) {
                        let name = ModelName::from_parts(&host, &namespace, &model, &tag);
                        found.push(ManifestRef { name, path });
                    }
                }
            }
        }
        found
    }

    /// `path` with symlinks resolved; `None` if it resolves outside the store root.
    fn inside(&self, path: &Path) -> std::io::Result<Option<PathBuf>> {
        let real = fs::canonicalize(path)?;
        Ok(real.starts_with(&self.canonical_root).then_some(real))
    }

    pub fn read_manifest(&self, path: &Path) -> Result<Manifest, Problem> {
        let bad = |detail: String| Problem::BadManifest { detail };
        let real = self
            .inside(path)
            .map_err(|e| bad(e.to_string()))?
            .ok_or_else(|| bad("the manifest links outside the store".into()))?;
        let bytes = read_capped(&real, MANIFEST_CAP).map_err(bad)?;
        serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))
    }

    /// The checked path of a layer's blob: a valid digest, a regular file inside the store,
    /// of exactly the size the manifest states. The path returned has symlinks resolved, so
    /// later opens reach the file that was checked.
    pub fn blob(&self, layer: &Layer) -> Result<PathBuf, Problem> {
        let digest = Digest::parse(&layer.digest).ok_or_else(|| Problem::BadDigest { digest: layer.digest.clone() })?;
        let path = self.root.join("blobs").join(digest.file_name());
        let real = match self.inside(&path) {
            Ok(Some(real)) => real,
            Ok(None) => return Err(Problem::OutsideStore { path }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Problem::MissingBlob { digest: layer.digest.clone(), path });
            }
            Err(e) => return Err(Problem::Unreadable { path, detail: e.to_string() }),
        };
        let meta =
            fs::metadata(&real).map_err(|e| Problem::Unreadable { path: path.clone(), detail: e.to_string() })?;
        if !meta.is_file() {
            return Err(Problem::NotAFile { path });
        }
        if meta.len() != layer.size {
            return Err(Problem::SizeMismatch {
                digest: layer.digest.clone(),
                expected: layer.size,
                actual: meta.len(),
            });
        }
        Ok(real)
    }

    pub fn read_config(&self, layer: &Layer) -> Result<ModelConfig, Problem> {
        let path = self.blob(layer)?;
        let bytes = read_capped(&path, CONFIG_CAP).map_err(|detail| Problem::BadConfig { detail })?;
        serde_json::from_slice(&bytes).map_err(|e| Problem::BadConfig { detail: e.to_string() })
    }
}

/// Read a whole file that must not exceed `cap` bytes.
pub fn read_capped(path: &Path, cap: u64) -> Result<Vec<u8>, String> {
    let f = fs::File::open(path).map_err(|e| e.to_string())?;
    let mut bytes = Vec::new();
    f.take(cap + 1).read_to_end(&mut bytes).map_err(|e| e.to_string())?;
    if bytes.len() as u64 > cap {
        return Err(format!("{} is larger than {cap} bytes", path.display()));
    }
    Ok(bytes)
}

/// Sorted visible children of `dir` that are directories (`dirs`) or files. Symlinked
/// directories are not followed, so a link cannot make the walk loop or leave the store.
fn children(dir: &Path, dirs: bool, warnings: &mut Vec<String>) -> Vec<(String, PathBuf)> {
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) => {
            warnings.push(format!("cannot read {}: {e}", dir.display()));
            return Vec::new();
        }
    };
    let mut out: Vec<(String, PathBuf)> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            if name.starts_with('.') {
                return None;
            }
            let ft = e.file_type().ok()?;
            let keep = if dirs { ft.is_dir() } else { ft.is_file() || ft.is_symlink() };
            keep.then(|| (name, e.path()))
        })
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_accepts_only_sha256_hex64() {
        let hex = "0123456789abcdefABCDEF0123456789abcdef0123456789abcdef0123456789";
        assert_eq!(Digest::parse(&format!("sha256:{hex}")).unwrap().file_name(), format!("sha256-{hex}"));
        assert!(Digest::parse(&format!("sha256-{hex}")).is_some());
        for bad in [
            "sha256:../../etc/passwd".to_string(),
            format!("sha256:{}", &hex[1..]),
            format!("sha256:{hex}0"),
            format!("md5:{}", &hex[..32]),
            format!("sha512:{hex}"),
            format!("sha256:{}/..", &hex[..61]),
            format!("SHA256:{hex}"),
            format!("sha256:{}g", &hex[..63]),
        ] {
            assert!(Digest::parse(&bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn layer_kinds() {
        assert_eq!(LayerKind::from_media_type("application/vnd.ollama.image.model"), LayerKind::Model);
        assert_eq!(LayerKind::from_media_type("application/vnd.ollama.image.projector"), LayerKind::Projector);
        assert_eq!(LayerKind::from_media_type("application/vnd.ollama.image.tensor"), LayerKind::Other);
        assert_eq!(LayerKind::from_media_type("model"), LayerKind::Other);
    }

    #[test]
    fn config_fields_of_wrong_type_read_as_absent() {
        let c: ModelConfig =
            serde_json::from_str(r#"{"model_family":"gemma4","context_length":"big","capabilities":["vision"],"x":1}"#)
                .unwrap();
        assert_eq!(c.model_family.as_deref(), Some("gemma4"));
        assert_eq!(c.context_length, None);
        assert_eq!(c.capabilities, Some(vec!["vision".to_string()]));
    }
}
