//! GGUF files imported from anywhere on disk, remembered in a small versioned JSON list in
//! the app data dir. The files stay where they are; only their paths are recorded.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::gguf::GgufFile;
use crate::{Error, Result};

pub const LIST_VERSION: u32 = 1;
const LIST_FILE: &str = "imported.json";

/// `<data dir>/rullama/imported.json` (e.g. `~/.local/share/rullama/imported.json`).
pub fn default_list_path() -> Option<PathBuf> {
    directories::ProjectDirs::from("", "", "rullama").map(|d| d.data_dir().join(LIST_FILE))
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImportedFile {
    pub name: String,
    /// Absolute path, symlinks resolved at import time.
    pub path: PathBuf,
    /// Seconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub added: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImportedList {
    pub version: u32,
    #[serde(default)]
    pub files: Vec<ImportedFile>,
}

impl Default for ImportedList {
    fn default() -> Self {
        ImportedList { version: LIST_VERSION, files: Vec::new() }
    }
}

impl ImportedList {
    /// Load the list; a missing file is an empty list.
    pub fn load(path: &Path) -> Result<ImportedList> {
        let bytes = match fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ImportedList::default()),
            Err(e) => return Err(Error::io(path, e)),
        };
        let bad =
            |e: serde_json::Error| Error::Store(format!("imported-models list {} is not valid: {e}", path.display()));
        // Check the version before the shape, so a newer format gets a message about versions.
        #[derive(Deserialize)]
        struct Version {
            version: u32,
        }
        let Version { version } = serde_json::from_slice(&bytes).map_err(bad)?;
        if version != LIST_VERSION {
            return Err(Error::Store(format!(
                "imported-models list {} has version {version}; this rullama reads version {LIST_VERSION}",
                path.display()
            )));
        }
        serde_json::from_slice(&bytes).map_err(bad)
    }

    /// Write the list atomically (temp file in the same directory, then rename), so a crash
    /// never leaves a half-written list.
    pub fn save(&self, path: &Path) -> Result<()> {
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| LIST_FILE.into());
        let tmp = dir.join(format!(".{file_name}.{}.tmp", std::process::id()));
        let json =
            serde_json::to_vec_pretty(self).map_err(|e| Error::Store(format!("cannot encode imported list: {e}")))?;
        let written = fs::File::create(&tmp).and_then(|mut f| {
            f.write_all(&json)?;
            f.write_all(b"\n")?;
            f.sync_all()
        });
        if let Err(e) = written.and_then(|_| fs::rename(&tmp, path)) {
            let _ = fs::remove_file(&tmp);
            return Err(Error::io(path, e));
        }
        Ok(())
    }

    /// The entry called `name_or_path`, or imported from that path.
    pub fn find(&self, name_or_path: &str) -> Option<usize> {
        let as_path = Path::new(name_or_path);
        let canonical = fs::canonicalize(as_path).ok();
        self.files
            .iter()
            .position(|f| f.name == name_or_path)
            .or_else(|| self.files.iter().position(|f| f.path == as_path || Some(&f.path) == canonical.as_ref()))
    }
}

/// Import `file` (which must be a readable GGUF) under `name`, default its file stem.
/// Importing a file that is already listed renames it if a new name is given.
pub fn add(list_path: &Path, file: &Path, name: Option<&str>) -> Result<ImportedFile> {
    let path = fs::canonicalize(file).map_err(|e| Error::io(file, e))?;
    if !path.is_file() {
        return Err(Error::Input(format!("{} is not a file", file.display())));
    }
    // Parsing the header proves it is a GGUF before it is listed.
    GgufFile::open(&path)?;
    let name = match name {
        Some(n) => n.to_string(),
        None => path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default(),
    };
    check_name(&name)?;

    let mut list = ImportedList::load(list_path)?;
    if let Some(other) = list.files.iter().find(|f| f.name == name && f.path != path) {
        return Err(Error::Input(format!(
            "the name {name:?} is already used by {}; choose another name",
            other.path.display()
        )));
    }
    let entry = match list.files.iter_mut().find(|f| f.path == path) {
        Some(existing) => {
            existing.name = name;
            existing.clone()
        }
        None => {
            let added = SystemTime::now().duration_since(UNIX_EPOCH).ok().map(|d| d.as_secs());
            let entry = ImportedFile { name, path, added };
            list.files.push(entry.clone());
            entry
        }
    };
    list.save(list_path)?;
    Ok(entry)
}

/// Forget an imported file (by name or path). The file itself is not touched.
pub fn remove(list_path: &Path, name_or_path: &str) -> Result<ImportedFile> {
    let mut list = ImportedList::load(list_path)?;
    let i = list
        .find(name_or_path)
        .ok_or_else(|| Error::ModelNotFound(format!("{name_or_path} is not an imported model")))?;
    let removed = list.files.remove(i);
    list.save(list_path)?;
    Ok(removed)
}

fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 256
        && name.trim() == name
        && !name.chars().any(|c| c == '/' || c == '\\' || c.is_control());
    if ok {
        Ok(())
    } else {
        Err(Error::Input(format!(
            "{name:?} is not a usable model name (no slashes, control characters or edge spaces)"
        )))
    }
}
