//! Whether a catalog entry can be used, and if not, why.
//!
//! A broken entry is data, not an error: one bad manifest or missing blob must never hide
//! the other models from a listing.

use std::fmt;
use std::path::PathBuf;

use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    Broken(Problem),
}

impl Status {
    pub fn is_ok(&self) -> bool {
        matches!(self, Status::Ok)
    }

    pub fn problem(&self) -> Option<&Problem> {
        match self {
            Status::Ok => None,
            Status::Broken(p) => Some(p),
        }
    }
}

/// Why an entry cannot be used. Serialized with a `kind` tag so tools can match on it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Problem {
    /// The manifest file is unreadable or not valid manifest JSON.
    BadManifest {
        detail: String,
    },
    /// The manifest lists no GGUF `model` layer.
    MissingModelLayer,
    /// The manifest is of a format rullama does not run (e.g. safetensors/MLX).
    UnsupportedFormat {
        format: String,
    },
    /// A layer digest is not `sha256:<64 hex>`; it is never turned into a path.
    BadDigest {
        digest: String,
    },
    MissingBlob {
        digest: String,
        path: PathBuf,
    },
    /// The blob is a symlink (or inside a symlinked directory) that leaves the store root.
    OutsideStore {
        path: PathBuf,
    },
    /// The blob exists but is not a regular file.
    NotAFile {
        path: PathBuf,
    },
    SizeMismatch {
        digest: String,
        expected: u64,
        actual: u64,
    },
    /// The config blob is not valid JSON.
    BadConfig {
        detail: String,
    },
    CorruptGguf {
        detail: String,
    },
    /// An imported file that is no longer where it was imported from.
    MissingFile {
        path: PathBuf,
    },
    Unreadable {
        path: PathBuf,
        detail: String,
    },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::BadManifest { detail } => write!(f, "bad manifest: {detail}"),
            Problem::MissingModelLayer => write!(f, "the manifest has no model layer"),
            Problem::UnsupportedFormat { format } => {
                write!(f, "unsupported model format {format:?} (only GGUF models run)")
            }
            Problem::BadDigest { digest } => write!(f, "invalid layer digest {digest:?}"),
            Problem::MissingBlob { digest, path } => {
                write!(f, "blob {digest} is missing ({}); pull the model again", path.display())
            }
            Problem::OutsideStore { path } => write!(f, "blob {} points outside the model store", path.display()),
            Problem::NotAFile { path } => write!(f, "blob {} is not a regular file", path.display()),
            Problem::SizeMismatch { digest, expected, actual } => {
                write!(f, "blob {digest} is {actual} bytes, the manifest says {expected}; pull the model again")
            }
            Problem::BadConfig { detail } => write!(f, "bad config blob: {detail}"),
            Problem::CorruptGguf { detail } => write!(f, "corrupt GGUF: {detail}"),
            Problem::MissingFile { path } => write!(f, "file {} no longer exists", path.display()),
            Problem::Unreadable { path, detail } => write!(f, "cannot read {}: {detail}", path.display()),
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Status::Ok => f.write_str("ok"),
            Status::Broken(p) => write!(f, "broken: {p}"),
        }
    }
}
