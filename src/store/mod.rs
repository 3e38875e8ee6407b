//! Ollama store and model catalog.
