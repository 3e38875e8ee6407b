// Sampling presets. Balanced is Gemma's published recommendation (temperature 1.0, top-k 64,
// top-p 0.95, no min-p); Precise narrows it for factual and code answers; Creative widens it.
import type { Sampling } from '../types';

export type PresetName = 'Precise' | 'Balanced' | 'Creative';

type Knobs = Omit<Sampling, 'seed' | 'max_tokens'>;

export const PRESETS: Readonly<Record<PresetName, Knobs>> = {
  Precise: { temperature: 0.2, top_k: 20, top_p: 0.8, min_p: 0.05, repeat_penalty: 1.05 },
  Balanced: { temperature: 1.0, top_k: 64, top_p: 0.95, min_p: 0.0, repeat_penalty: 1.0 },
  Creative: { temperature: 1.3, top_k: 100, top_p: 0.98, min_p: 0.02, repeat_penalty: 1.0 },
};

export const PRESET_NAMES = Object.keys(PRESETS) as PresetName[];

/** A preset sets the sampling knobs; the seed and reply limit are the user's own. */
export const applyPreset = (sampling: Sampling, name: PresetName): Sampling => ({
  ...sampling,
  ...PRESETS[name],
});

/** The preset these settings equal, if any. */
export function matchingPreset(sampling: Sampling): PresetName | null {
  for (const name of PRESET_NAMES) {
    const p = PRESETS[name];
    const same = (Object.keys(p) as (keyof Knobs)[]).every(
      (k) => Math.abs(p[k] - sampling[k]) < 1e-9,
    );
    if (same) return name;
  }
  return null;
}
