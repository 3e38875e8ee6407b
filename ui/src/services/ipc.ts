import { invoke, type InvokeArgs } from '@tauri-apps/api/core';

/**
 * The one place the UI crosses into Rust. Keeping every call behind this helper lets the
 * services stay one line each and gives tests a single seam (mockIPC) to observe.
 */
export function call<T>(command: string, args?: InvokeArgs): Promise<T> {
  return invoke<T>(command, args);
}
