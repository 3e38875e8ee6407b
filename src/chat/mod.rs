//! Prompt renderers (gemma4 small/large, gemma3) and the gemma4 output parser.
