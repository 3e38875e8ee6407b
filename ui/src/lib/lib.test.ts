import { describe, expect, it } from 'vitest';
import { safeFilename } from './download';
import { humanError } from './errors';
import { humanBytes, humanContext, humanCount, humanRate } from './format';
import { normalizeMath } from './mathDelimiters';
import { applyPreset, matchingPreset, PRESETS } from './presets';
import { describeProblem } from './problems';
import { applyAppearance } from './theme';
import { SAMPLING } from '../../test/fakeBackend';

describe('human numbers', () => {
  it('formats sizes, context lengths, parameter counts and speed', () => {
    expect(humanBytes(253_000_000)).toBe('253 MB');
    expect(humanBytes(4_600_000_000)).toBe('4.6 GB');
    expect(humanBytes(512)).toBe('512 B');
    expect(humanBytes(null)).toBe('');
    expect(humanContext(32768)).toBe('32K');
    expect(humanContext(131072)).toBe('128K');
    expect(humanContext(500)).toBe('500');
    expect(humanCount(268_098_176)).toBe('268M');
    expect(humanCount(4_600_000_000)).toBe('4.6B');
    expect(humanCount(27_000_000_000)).toBe('27B');
    expect(humanRate(41.26)).toBe('41.3 tok/s');
  });
});

describe('human errors', () => {
  it('turns engine errors into sentences a user can act on', () => {
    expect(humanError('unsupported model: architecture llama')).toBe("This model isn't supported: architecture llama");
    expect(humanError('not a valid GGUF file: bad magic')).toBe('The model file is damaged or not a GGUF file: bad magic');
    expect(humanError({ message: 'GPU out of memory while allocating 3 GB' })).toMatch(/^Not enough memory for this model\./);
    expect(humanError(new Error('model not found: foo'))).toBe('No model named "foo" was found. It may have been removed.');
    expect(humanError('cancelled')).toBe('Stopped.');
    expect(humanError('weird thing')).toBe('Weird thing');
    expect(humanError(undefined)).toBe('Something went wrong.');
  });
});

describe('broken model reasons', () => {
  it('describes the catalog problem kinds', () => {
    expect(describeProblem({ kind: 'missing_blob', digest: 'sha256:ab', path: '/b' })).toMatch(/missing.*Pull the model again/);
    expect(describeProblem({ kind: 'unsupported_format', format: 'safetensors' })).toBe(
      'It is in safetensors format; only GGUF models run here.',
    );
    expect(describeProblem({ kind: 'missing_file', path: '/m/x.gguf' })).toContain('/m/x.gguf');
    expect(describeProblem({ kind: 'something_new', detail: 'why' })).toBe('Something new: why');
  });
});

describe('sampling presets', () => {
  it('sets the knobs but keeps the seed and reply limit', () => {
    const s = applyPreset({ ...SAMPLING, seed: 42, max_tokens: 100 }, 'Precise');
    expect(s).toEqual({ ...PRESETS.Precise, seed: 42, max_tokens: 100 });
    expect(matchingPreset(s)).toBe('Precise');
    expect(matchingPreset({ ...s, temperature: 0.33 })).toBeNull();
  });
});

describe('math delimiters', () => {
  it('rewrites \\( \\) and \\[ \\] to dollar math, but not inside code', () => {
    expect(normalizeMath('Euler: \\(e^{i\\pi}+1=0\\).')).toBe('Euler: $e^{i\\pi}+1=0$.');
    expect(normalizeMath('\\[x^2\\]')).toBe('\n$$\nx^2\n$$\n');
    const code = 'Use `\\(a\\)` and\n```\n\\[b\\]\n```\n';
    expect(normalizeMath(code)).toBe(code);
  });
});

describe('downloads', () => {
  it('makes safe file names from titles', () => {
    expect(safeFilename('a/b: c?', 'md')).toBe('a b c.md');
    expect(safeFilename('   ', 'json')).toBe('chat.json');
  });
});

describe('appearance', () => {
  it('sets the theme attribute and a clamped font size', () => {
    applyAppearance({ theme: 'dark', font_size: 40 });
    expect(document.documentElement.dataset.theme).toBe('dark');
    expect(document.documentElement.style.getPropertyValue('--font-size')).toBe('22px');
    applyAppearance({ theme: 'system', font_size: 14 });
    expect(document.documentElement.dataset.theme).toBe('system');
    expect(document.documentElement.style.getPropertyValue('--font-size')).toBe('14px');
  });
});
