import { Channel } from '@tauri-apps/api/core';
import type { LoadedModel, LoadProgress, ModelEntry } from '../types';
import { call } from './ipc';

export const listModels = () => call<ModelEntry[]>('list_models');

export const importModel = (path: string) => call<ModelEntry>('import_model', { path });

export const forgetModel = (name: string) => call<void>('forget_model', { name });

/** Opens the native file dialog on the Rust side; null when the user cancels. */
export const pickGgufFile = () => call<string | null>('pick_gguf_file');

export function loadModel(
  name: string,
  onProgress: (progress: LoadProgress) => void,
): Promise<LoadedModel> {
  const channel = new Channel<LoadProgress>();
  channel.onmessage = onProgress;
  return call<LoadedModel>('load_model', { name, onProgress: channel });
}

export const unloadModel = () => call<void>('unload_model');

export const currentModel = () => call<LoadedModel | null>('current_model');
