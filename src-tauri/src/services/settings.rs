//! App settings: a small versioned JSON file, replaced atomically on save.
//!
//! A missing file means defaults. A file that cannot be read as settings is set aside as
//! `settings.json.bad` (so nothing the person wrote is destroyed) and defaults are used: a
//! broken settings file must never stop the app from opening.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use rullama::runtime::backend::PrefillPrecision;

use crate::atomic;
use crate::error::{AppError, AppResult};

pub const SETTINGS_VERSION: u32 = 1;
pub const MIN_CONTEXT: u32 = 256;
pub const MAX_CONTEXT: u32 = 1 << 20;
pub const FONT_SIZES: std::ops::RangeInclusive<u32> = 10..=32;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Theme {
    Light,
    Dark,
    #[default]
    System,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Settings {
    pub version: u32,
    /// Loaded at start-up when present.
    pub default_model: Option<String>,
    /// Tokens of context to allocate (capped by the model's own limit); `None`: the
    /// model's own limit.
    pub context_length: Option<u32>,
    /// GPU adapter, as `list_adapters` names it; `None` picks the best one. Applies at the
    /// next start.
    pub gpu_adapter: Option<String>,
    /// How prompts are read on GPUs with tensor cores: f32-accurate products, or products
    /// of f16-rounded inputs (faster, logits a little further from the reference). Applies
    /// from the next reply.
    pub prefill_precision: PrefillPrecision,
    pub theme: Theme,
    /// Base font size in CSS pixels.
    pub font_size: u32,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            version: SETTINGS_VERSION,
            default_model: None,
            context_length: Some(8192),
            gpu_adapter: None,
            prefill_precision: PrefillPrecision::F32,
            theme: Theme::System,
            font_size: 15,
        }
    }
}

impl Settings {
    pub fn validate(&self) -> AppResult<()> {
        if self.version != SETTINGS_VERSION {
            return Err(AppError::Invalid(format!(
                "Settings version {} is not understood by this version of the app (it writes version {SETTINGS_VERSION}).",
                self.version
            )));
        }
        if self.context_length.is_some_and(|n| !(MIN_CONTEXT..=MAX_CONTEXT).contains(&n)) {
            return Err(AppError::Invalid(format!(
                "The context length must be between {MIN_CONTEXT} and {MAX_CONTEXT} tokens."
            )));
        }
        if !FONT_SIZES.contains(&self.font_size) {
            return Err(AppError::Invalid(format!(
                "The font size must be between {} and {} pixels.",
                FONT_SIZES.start(),
                FONT_SIZES.end()
            )));
        }
        Ok(())
    }
}

pub struct SettingsStore {
    path: PathBuf,
    current: Mutex<Settings>,
    /// Why the file on disk was not used at start-up, if it was not.
    load_warning: Option<String>,
}

impl SettingsStore {
    pub fn open(path: &Path) -> SettingsStore {
        let (settings, load_warning) = match read(path) {
            Ok(s) => (s, None),
            Err(why) => {
                let aside = path.with_extension("json.bad");
                let _ = std::fs::rename(path, &aside);
                (Settings::default(), Some(format!("{why} It was moved to {} and defaults are used.", aside.display())))
            }
        };
        SettingsStore { path: path.to_path_buf(), current: Mutex::new(settings), load_warning }
    }

    /// The settings on disk, if readable, without touching the file.
    pub fn peek(path: &Path) -> Option<Settings> {
        read(path).ok()
    }

    pub fn get(&self) -> Settings {
        self.current.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn load_warning(&self) -> Option<&str> {
        self.load_warning.as_deref()
    }

    pub fn set(&self, settings: Settings) -> AppResult<()> {
        settings.validate()?;
        let mut json = serde_json::to_vec_pretty(&settings).expect("settings always serialize");
        json.push(b'\n');
        atomic::write(&self.path, &json).map_err(|e| AppError::io(format!("save the settings to {}", self.path.display()), e))?;
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = settings;
        Ok(())
    }
}

/// The settings in `path`; a missing file is the defaults. Missing fields take defaults so
/// an older file keeps working when fields are added.
fn read(path: &Path) -> Result<Settings, String> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Settings::default()),
        Err(e) => return Err(format!("The settings file {} cannot be read ({e}).", path.display())),
    };
    let settings: Settings = serde_json::from_slice(&bytes)
        .map_err(|e| format!("The settings file {} is not valid ({e}).", path.display()))?;
    settings.validate().map_err(|e| format!("The settings file {} is not usable: {e}", path.display()))?;
    Ok(settings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_file_gives_defaults_and_save_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        let store = SettingsStore::open(&path);
        assert_eq!(store.get(), Settings::default());
        assert!(store.load_warning().is_none());

        let s = Settings { default_model: Some("gemma3:270m".into()), theme: Theme::Dark, font_size: 18, ..Settings::default() };
        store.set(s.clone()).unwrap();
        assert_eq!(SettingsStore::open(&path).get(), s);
        let on_disk: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(on_disk["version"], 1);
        assert_eq!(on_disk["theme"], "dark");
    }

    #[test]
    fn invalid_values_are_refused_and_not_saved() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        let store = SettingsStore::open(&path);
        for bad in [
            Settings { context_length: Some(10), ..Settings::default() },
            Settings { font_size: 100, ..Settings::default() },
            Settings { version: 2, ..Settings::default() },
        ] {
            assert!(matches!(store.set(bad), Err(AppError::Invalid(_))));
        }
        assert!(!path.exists());
        assert_eq!(store.get(), Settings::default());
    }

    #[test]
    fn older_file_with_missing_fields_reads_with_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        std::fs::write(&path, r#"{"version":1,"theme":"light"}"#).unwrap();
        let s = SettingsStore::open(&path).get();
        assert_eq!(s.theme, Theme::Light);
        assert_eq!(s.context_length, Settings::default().context_length);
        assert_eq!(s.prefill_precision, PrefillPrecision::F32);
    }

    #[test]
    fn corrupt_file_is_set_aside_not_lost() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        std::fs::write(&path, b"{not json").unwrap();
        let store = SettingsStore::open(&path);
        assert_eq!(store.get(), Settings::default());
        assert!(store.load_warning().unwrap().contains("not valid"));
        assert_eq!(std::fs::read(dir.path().join("settings.json.bad")).unwrap(), b"{not json");
    }
}
