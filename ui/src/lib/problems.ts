// Sentences for the reasons a model in the catalog cannot be used (the Rust `Problem` kinds).
import type { ModelEntry, Problem } from '../types';

const field = (p: Problem, name: string): string => {
  const v = p[name];
  return v === null || v === undefined ? '' : String(v);
};

export function describeProblem(p: Problem): string {
  switch (p.kind) {
    case 'bad_manifest':
      return `Its Ollama manifest can't be read (${field(p, 'detail')}).`;
    case 'missing_model_layer':
      return 'Its Ollama manifest has no model file.';
    case 'unsupported_format':
      return `It is in ${field(p, 'format') || 'a'} format; only GGUF models run here.`;
    case 'bad_digest':
      return 'Its Ollama manifest names a file with an invalid checksum.';
    case 'missing_blob':
      return 'Its model file is missing from the Ollama store. Pull the model again.';
    case 'outside_store':
      return 'Its model file points outside the Ollama store, so it is not opened.';
    case 'not_a_file':
      return 'Its model file is not a regular file.';
    case 'size_mismatch':
      return 'Its model file is incomplete or damaged (wrong size). Pull the model again.';
    case 'bad_config':
      return `Its Ollama config can't be read (${field(p, 'detail')}).`;
    case 'corrupt_gguf':
      return `The file is damaged or not a GGUF model (${field(p, 'detail')}).`;
    case 'missing_file':
      return `The file is no longer at ${field(p, 'path')}. Import it again or remove it.`;
    case 'unreadable':
      return `The file can't be read (${field(p, 'detail')}).`;
    default: {
      const detail = field(p, 'detail') || field(p, 'message') || field(p, 'reason');
      const kind = p.kind.replace(/_/g, ' ');
      return detail ? `${capitalize(kind)}: ${detail}` : `${capitalize(kind)}.`;
    }
  }
}

export const problemOf = (m: ModelEntry): Problem | null =>
  typeof m.status === 'object' && m.status !== null && 'broken' in m.status ? m.status.broken : null;

export const capitalize = (s: string): string => (s ? s[0].toUpperCase() + s.slice(1) : s);
