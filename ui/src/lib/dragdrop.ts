// Dropping .gguf files on the window. Tauri reports file drops as webview events with real
// paths (the DOM drop event has no paths), so this listens there; outside Tauri (tests, a
// plain browser) there is nothing to listen to and it does nothing.

export type DropState = 'hover' | 'none';

export const isGguf = (path: string) => /\.gguf$/i.test(path);

function inTauri(): boolean {
  const internals = (window as unknown as { __TAURI_INTERNALS__?: { metadata?: { currentWebview?: unknown } } })
    .__TAURI_INTERNALS__;
  return Boolean(internals?.metadata?.currentWebview);
}

/** Returns a function that stops listening. */
export async function listenForGgufDrops(
  onPaths: (paths: string[]) => void,
  onHover: (state: DropState) => void,
): Promise<() => void> {
  if (!inTauri()) return () => {};
  try {
    const { getCurrentWebview } = await import('@tauri-apps/api/webview');
    const unlisten = await getCurrentWebview().onDragDropEvent((event) => {
      const p = event.payload;
      if (p.type === 'enter' || p.type === 'over') onHover('hover');
      else if (p.type === 'leave') onHover('none');
      else if (p.type === 'drop') {
        onHover('none');
        const ggufs = p.paths.filter(isGguf);
        if (ggufs.length > 0) onPaths(ggufs);
      }
    });
    return () => void unlisten();
  } catch {
    // No event permission or no webview: drag and drop is a convenience, the Import button remains.
    return () => {};
  }
}
