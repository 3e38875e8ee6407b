import type { KeyboardEvent as ReactKeyboardEvent } from 'react';

/** An IME is composing (e.g. Japanese input): Enter confirms the candidate and must not send.
 * keyCode 229 covers WebKit, which fires keydown after compositionend with isComposing false. */
export function isComposing(e: ReactKeyboardEvent): boolean {
  return e.nativeEvent.isComposing || e.keyCode === 229 || e.nativeEvent.keyCode === 229;
}

/** Ctrl+key on Linux/Windows, Cmd+key on macOS. */
export function isModKey(e: KeyboardEvent, key: string): boolean {
  return (e.ctrlKey || e.metaKey) && !e.altKey && !e.shiftKey && e.key.toLowerCase() === key;
}
