// Numbers for people.

const SIZE_UNITS = ['B', 'KB', 'MB', 'GB', 'TB'];

/** Decimal units, as Ollama and LM Studio show model sizes: 253 MB, 4.6 GB. */
export function humanBytes(bytes: number | null | undefined): string {
  if (bytes === null || bytes === undefined || !Number.isFinite(bytes) || bytes < 0) return '';
  let value = bytes;
  let unit = 0;
  while (value >= 1000 && unit < SIZE_UNITS.length - 1) {
    value /= 1000;
    unit += 1;
  }
  const digits = unit === 0 || value >= 100 ? 0 : 1;
  return `${value.toFixed(digits)} ${SIZE_UNITS[unit]}`;
}

/** Context lengths are powers of two, so 32768 reads as "32K" and 131072 as "128K". */
export function humanContext(tokens: number | null | undefined): string {
  if (!tokens || tokens <= 0) return '';
  if (tokens >= 1024 && tokens % 1024 === 0) return `${tokens / 1024}K`;
  if (tokens >= 1000) return `${(tokens / 1024).toFixed(1)}K`;
  return String(tokens);
}

/** Parameter counts: 268M, 4.6B. */
export function humanCount(n: number | null | undefined): string {
  if (n === null || n === undefined || n <= 0) return '';
  if (n >= 1e9) return `${(n / 1e9).toFixed(n >= 1e10 ? 0 : 1)}B`;
  if (n >= 1e6) return `${Math.round(n / 1e6)}M`;
  if (n >= 1e3) return `${Math.round(n / 1e3)}K`;
  return String(n);
}

export function humanRate(tokPerSecond: number | null | undefined): string {
  if (tokPerSecond === null || tokPerSecond === undefined || !Number.isFinite(tokPerSecond)) return '';
  return `${tokPerSecond.toFixed(1)} tok/s`;
}
