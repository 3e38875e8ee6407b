import { useState } from 'react';
import { applyPreset, matchingPreset, PRESET_NAMES } from '../lib/presets';
import type { Chat, Sampling } from '../types';

interface Props {
  chat: Chat;
  onSave: (systemPrompt: string, sampling: Sampling) => Promise<void>;
  onClose: () => void;
}

type NumberKey = 'temperature' | 'top_k' | 'top_p' | 'min_p' | 'repeat_penalty';

const FIELDS: ReadonlyArray<{ key: NumberKey; label: string; min: number; max: number; step: number }> = [
  { key: 'temperature', label: 'Temperature', min: 0, max: 2, step: 0.05 },
  { key: 'top_k', label: 'Top-k', min: 0, max: 500, step: 1 },
  { key: 'top_p', label: 'Top-p', min: 0, max: 1, step: 0.01 },
  { key: 'min_p', label: 'Min-p', min: 0, max: 1, step: 0.01 },
  { key: 'repeat_penalty', label: 'Repeat penalty', min: 0.5, max: 2, step: 0.01 },
];

/** Per-chat system prompt and sampling, with presets. */
export function ChatSettings({ chat, onSave, onClose }: Props) {
  const [systemPrompt, setSystemPrompt] = useState(chat.system_prompt ?? '');
  const [sampling, setSampling] = useState<Sampling>(chat.sampling);
  const [saving, setSaving] = useState(false);
  const preset = matchingPreset(sampling);

  const setNumber = (key: NumberKey, raw: string) => {
    const value = Number(raw);
    if (raw !== '' && Number.isFinite(value)) setSampling((s) => ({ ...s, [key]: value }));
  };
  const setOptional = (key: 'seed' | 'max_tokens', raw: string) => {
    const value = Number.parseInt(raw, 10);
    setSampling((s) => ({ ...s, [key]: raw.trim() === '' || !Number.isFinite(value) ? null : value }));
  };

  return (
    <section className="chat-settings" aria-label="Chat settings">
      <div className="panel-header">
        <h2>Chat settings</h2>
        <button type="button" className="icon-button" aria-label="Close chat settings" onClick={onClose}>
          ×
        </button>
      </div>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          setSaving(true);
          onSave(systemPrompt, sampling).finally(() => setSaving(false));
        }}
      >
        <label className="field">
          <span>System prompt</span>
          <textarea
            rows={4}
            value={systemPrompt}
            placeholder="e.g. You are a concise assistant."
            onChange={(e) => setSystemPrompt(e.target.value)}
          />
        </label>

        <div className="presets" role="group" aria-label="Sampling presets">
          {PRESET_NAMES.map((name) => (
            <button
              key={name}
              type="button"
              className="chip"
              aria-pressed={preset === name}
              onClick={() => setSampling((s) => applyPreset(s, name))}
            >
              {name}
            </button>
          ))}
        </div>

        <div className="field-grid">
          {FIELDS.map((f) => (
            <label className="field" key={f.key}>
              <span>{f.label}</span>
              <input
                type="number"
                min={f.min}
                max={f.max}
                step={f.step}
                value={sampling[f.key]}
                onChange={(e) => setNumber(f.key, e.target.value)}
              />
            </label>
          ))}
          <label className="field">
            <span>Seed</span>
            <input
              type="number"
              placeholder="random"
              value={sampling.seed ?? ''}
              onChange={(e) => setOptional('seed', e.target.value)}
            />
          </label>
          <label className="field">
            <span>Max reply tokens</span>
            <input
              type="number"
              min={1}
              placeholder="no limit"
              value={sampling.max_tokens ?? ''}
              onChange={(e) => setOptional('max_tokens', e.target.value)}
            />
          </label>
        </div>

        <div className="form-actions">
          <button type="submit" className="primary-button" disabled={saving}>
            Save
          </button>
        </div>
      </form>
    </section>
  );
}
