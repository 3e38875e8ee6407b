import { emit } from '@tauri-apps/api/event';
import { mockIPC, mockWindows } from '@tauri-apps/api/mocks';
import { describe, expect, it, vi } from 'vitest';
import { listenForGgufDrops } from './dragdrop';

describe('GGUF drag and drop', () => {
  it('does nothing outside Tauri', async () => {
    const onPaths = vi.fn();
    const stop = await listenForGgufDrops(onPaths, vi.fn());
    expect(typeof stop).toBe('function');
    stop();
    expect(onPaths).not.toHaveBeenCalled();
  });

  it('imports only .gguf paths from a webview drop, and reports hovering', async () => {
    mockWindows('main');
    mockIPC(() => null, { shouldMockEvents: true });
    const onPaths = vi.fn();
    const onHover = vi.fn();
    const stop = await listenForGgufDrops(onPaths, onHover);
    await emit('tauri://drag-enter', { paths: ['/m/a.gguf'], position: { x: 1, y: 2 } });
    expect(onHover).toHaveBeenLastCalledWith('hover');
    await emit('tauri://drag-drop', { paths: ['/m/a.gguf', '/m/notes.txt', '/m/B.GGUF'], position: { x: 1, y: 2 } });
    expect(onPaths).toHaveBeenCalledWith(['/m/a.gguf', '/m/B.GGUF']);
    expect(onHover).toHaveBeenLastCalledWith('none');
    await emit('tauri://drag-drop', { paths: ['/m/readme.md'], position: { x: 0, y: 0 } });
    expect(onPaths).toHaveBeenCalledTimes(1);
    stop();
  });
});
