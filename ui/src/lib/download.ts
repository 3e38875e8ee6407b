import type { ExportFormat } from '../types';

export const EXPORT_EXT: Readonly<Record<ExportFormat, string>> = { markdown: 'md', json: 'json' };

/** A file name from a chat title: no path separators or control characters. */
export function safeFilename(title: string, ext: string): string {
  const base = title
    .replace(/[\\/:*?"<>|\u0000-\u001f]+/g, ' ')
    .replace(/\s+/g, ' ')
    .trim()
    .slice(0, 80);
  return `${base || 'chat'}.${ext}`;
}

/** A picked file's text. FileReader rather than Blob.text(): older webviews lack the latter. */
export function readFileText(file: Blob): Promise<string> {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result ?? ''));
    reader.onerror = () => reject(reader.error ?? new Error('could not read the file'));
    reader.readAsText(file);
  });
}
