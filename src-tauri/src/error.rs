//! The app's error: every variant displays as a sentence the person using the app can act
//! on, because the UI shows it as is.

use serde::{Serialize, Serializer};

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("{}", engine_sentence(.0))]
    Engine(#[from] rullama::Error),

    #[error("The chat history database failed: {0}")]
    Database(#[from] rusqlite::Error),

    #[error("{0}")]
    NotFound(String),

    #[error("{0}")]
    Invalid(String),

    #[error("{0}")]
    Io(String),

    #[error("No model is loaded. Choose a model first.")]
    NoModel,

    #[error("The app is shutting down.")]
    ShuttingDown,
}

pub type AppResult<T> = std::result::Result<T, AppError>;

impl AppError {
    pub fn io(what: impl std::fmt::Display, e: std::io::Error) -> AppError {
        AppError::Io(format!("Cannot {what}: {e}"))
    }
}

/// The engine's messages are precise but terse; the category decides how they are framed
/// (not supported / file broken / not found).
fn engine_sentence(e: &rullama::Error) -> String {
    use rullama::Error as E;
    match e {
        E::Unsupported(s) => format!("This model is not supported: {s}."),
        E::Gguf(s) => format!("The model file is broken (not a valid GGUF file): {s}."),
        E::MissingTensor(s) => format!("The model file is broken (missing data): {s}."),
        E::UnsupportedType(s) => format!("This model is not supported: it uses the tensor type {s}."),
        E::ModelNotFound(s) => format!("No model called {s} was found. Refresh the model list."),
        E::Store(s) => capitalize(s),
        E::Input(s) => capitalize(s),
        E::Io { path, source } => format!("Cannot read {}: {source}.", path.display()),
        E::Cancelled => "Cancelled.".to_string(),
        #[allow(unreachable_patterns)]
        other => capitalize(&other.to_string()),
    }
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    let mut out: String = match c.next() {
        Some(first) => first.to_uppercase().chain(c).collect(),
        None => return String::new(),
    };
    if !out.ends_with(['.', '!', '?']) {
        out.push('.');
    }
    out
}

/// Commands reject with the sentence itself.
impl Serialize for AppError {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_errors_read_as_sentences() {
        let e = AppError::from(rullama::Error::Unsupported("architecture llama".into()));
        assert_eq!(e.to_string(), "This model is not supported: architecture llama.");
        let e = AppError::from(rullama::Error::Input("the prompt is empty".into()));
        assert_eq!(e.to_string(), "The prompt is empty.");
        let e = AppError::from(rullama::Error::Gguf("bad magic".into()));
        assert!(e.to_string().starts_with("The model file is broken"));
        assert_eq!(serde_json::to_string(&AppError::NoModel).unwrap(), "\"No model is loaded. Choose a model first.\"");
    }
}
