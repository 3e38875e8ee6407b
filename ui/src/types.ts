// The shapes the Rust commands send and receive. Field names follow the Rust side (snake_case);
// command arguments are camelCase, as Tauri expects.

/** Row ids are whatever the database uses (integers or strings); never do arithmetic on them. */
export type Id = string | number;

export type Capability = 'text' | 'vision' | 'audio' | 'moe' | 'thinking' | (string & {});

/** Why a catalog entry cannot be used; `kind` is a snake_case tag, the rest depends on it. */
export interface Problem {
  kind: string;
  [field: string]: unknown;
}

export type ModelStatus = 'ok' | { broken: Problem };

export interface ModelEntry {
  name: string;
  source: 'ollama' | 'imported' | 'file';
  path: string | null;
  family: string | null;
  architecture: string | null;
  parameters: number | null;
  parameter_size: string | null;
  quantization: string | null;
  /** Bytes of the GGUF file. */
  size: number | null;
  context_length: number | null;
  capabilities: Capability[];
  /** Seconds since the Unix epoch. */
  modified: number | null;
  status: ModelStatus;
}

export interface LoadedModel {
  name: string;
  architecture: string;
  context_length: number;
  capabilities: Capability[];
  parameters: number;
}

export interface LoadProgress {
  stage: string;
  fraction: number;
}

export interface ChatSummary {
  id: Id;
  title: string;
  pinned: boolean;
  model: string | null;
  updated: number;
  last_message: string | null;
}

export type Role = 'user' | 'assistant' | 'system';
export type MessageStatus = 'complete' | 'streaming' | 'incomplete' | 'error';

export interface Message {
  id: Id;
  parent_id: Id | null;
  role: Role;
  content: string;
  thinking: string | null;
  status: MessageStatus;
  model: string | null;
  prompt_tokens: number | null;
  reply_tokens: number | null;
  tok_s: number | null;
  created: number;
}

export interface Sampling {
  temperature: number;
  top_k: number;
  top_p: number;
  min_p: number;
  repeat_penalty: number;
  /** null: a fresh random seed for every reply. */
  seed: number | null;
  /** null: until end of turn or the context is full. */
  max_tokens: number | null;
}

export interface Chat {
  id: Id;
  title: string;
  pinned: boolean;
  model: string | null;
  system_prompt: string;
  sampling: Sampling;
  /** Every message of every branch; the tree is given by parent_id. */
  messages: Message[];
}

export interface SearchHit {
  chat_id: Id;
  message_id: Id;
  title: string;
  snippet: string;
}

export type StopReason = 'end_of_turn' | 'max_tokens' | 'context_full' | 'cancelled';

export interface GenerationStats {
  prompt_tokens: number;
  reply_tokens: number;
  tok_s: number;
  context_used: number;
  context_max: number;
}

export type StreamEvent =
  | { type: 'started'; user_message_id: Id; assistant_message_id: Id }
  | { type: 'token'; text: string; thinking: boolean }
  | ({ type: 'stats' } & GenerationStats)
  | { type: 'done'; stop_reason: StopReason }
  | { type: 'error'; message: string };

export type Theme = 'light' | 'dark' | 'system';

export type PrefillPrecision = 'f32' | 'f16';

export interface Settings {
  version: number;
  default_model: string | null;
  context_length: number | null;
  gpu_adapter: string | null;
  /** How prompts are read on GPUs with tensor cores: f32-accurate, or f16 products (faster). */
  prefill_precision: PrefillPrecision;
  theme: Theme;
  font_size: number;
}

export type ExportFormat = 'markdown' | 'json';
