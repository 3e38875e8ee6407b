//! Tokenizers built from GGUF metadata: Gemma 4 BPE and Gemma 3 SentencePiece-BPE.
