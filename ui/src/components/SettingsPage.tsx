import { useEffect, useRef, useState } from 'react';
import * as chatService from '../services/chat';
import * as settingsService from '../services/settings';
import { EXPORT_EXT, readFileText } from '../lib/download';
import { humanError } from '../lib/errors';
import { problemOf } from '../lib/problems';
import { applyAppearance, FONT_SIZES } from '../lib/theme';
import { useNotices } from '../hooks/useNotices';
import type { ExportFormat, ModelEntry, PrefillPrecision, Settings, Theme } from '../types';

interface Props {
  models: ModelEntry[];
  settings: Settings;
  onSaved: (settings: Settings) => void;
  onImported: () => void;
  onClose: () => void;
}

const THEMES: ReadonlyArray<[Theme, string]> = [
  ['system', 'System'],
  ['light', 'Light'],
  ['dark', 'Dark'],
];

const CONTEXT_CHOICES = [2048, 4096, 8192, 16384, 32768, 65536, 131072];

export function SettingsPage({ models, settings, onSaved, onImported, onClose }: Props) {
  const { notify } = useNotices();
  const [draft, setDraft] = useState<Settings>(settings);
  const [adapters, setAdapters] = useState<string[]>([]);
  const [saving, setSaving] = useState(false);
  const fileRef = useRef<HTMLInputElement>(null);
  const headingRef = useRef<HTMLHeadingElement>(null);

  useEffect(() => {
    headingRef.current?.focus();
    settingsService.listAdapters().then(setAdapters, (e) => notify('error', `Couldn't list GPUs. ${humanError(e)}`));
  }, [notify]);

  // Theme and font size preview at once; leaving without saving restores the saved ones.
  useEffect(() => {
    applyAppearance(draft);
  }, [draft]);
  const savedRef = useRef(settings);
  savedRef.current = settings;
  useEffect(() => () => applyAppearance(savedRef.current), []);

  const update = <K extends keyof Settings>(key: K, value: Settings[K]) => setDraft((d) => ({ ...d, [key]: value }));

  const save = async () => {
    setSaving(true);
    try {
      await settingsService.setSettings(draft);
      savedRef.current = draft;
      onSaved(draft);
      notify('info', 'Settings saved.');
    } catch (e) {
      notify('error', `Couldn't save settings. ${humanError(e)}`);
    } finally {
      setSaving(false);
    }
  };

  const exportAll = async (format: ExportFormat) => {
    try {
      const text = await chatService.exportAll(format);
      const stamp = new Date().toISOString().slice(0, 10);
      const saved = await chatService.saveTextFile(`rullama-chats-${stamp}.${EXPORT_EXT[format]}`, text);
      if (saved) notify('info', `Saved to ${saved}`);
    } catch (e) {
      notify('error', `Export failed. ${humanError(e)}`);
    }
  };

  const importFile = async (file: File) => {
    try {
      const count = await chatService.importChats(await readFileText(file));
      notify('info', `Imported ${count} chat${count === 1 ? '' : 's'}.`);
      onImported();
    } catch (e) {
      notify('error', `Import failed. ${humanError(e)}`);
    }
  };

  const usable = models.filter((m) => problemOf(m) === null);
  const contextChoices = draft.context_length && !CONTEXT_CHOICES.includes(draft.context_length)
    ? [...CONTEXT_CHOICES, draft.context_length].sort((a, b) => a - b)
    : CONTEXT_CHOICES;

  return (
    <section className="settings-page" aria-labelledby="settings-heading">
      <div className="panel-header">
        <h1 id="settings-heading" tabIndex={-1} ref={headingRef}>
          Settings
        </h1>
        <button type="button" className="icon-button" aria-label="Close settings" onClick={onClose}>
          ×
        </button>
      </div>

      <form
        onSubmit={(e) => {
          e.preventDefault();
          void save();
        }}
      >
        <fieldset>
          <legend>Model</legend>
          <label className="field">
            <span>Default model</span>
            <select value={draft.default_model ?? ''} onChange={(e) => update('default_model', e.target.value || null)}>
              <option value="">None (choose each time)</option>
              {usable.map((m) => (
                <option key={m.name} value={m.name}>
                  {m.name}
                </option>
              ))}
              {draft.default_model && !usable.some((m) => m.name === draft.default_model) && (
                <option value={draft.default_model}>{draft.default_model} (not available)</option>
              )}
            </select>
          </label>
          <label className="field">
            <span>Context length</span>
            <select
              value={draft.context_length ?? ''}
              onChange={(e) => update('context_length', e.target.value ? Number(e.target.value) : null)}
            >
              <option value="">Model default</option>
              {contextChoices.map((n) => (
                <option key={n} value={n}>
                  {n.toLocaleString('en-US')} tokens
                </option>
              ))}
            </select>
            <small className="hint">Longer contexts use more GPU memory. Applies the next time a model loads.</small>
          </label>
          <label className="field">
            <span>GPU</span>
            <select value={draft.gpu_adapter ?? ''} onChange={(e) => update('gpu_adapter', e.target.value || null)}>
              <option value="">Automatic (fastest found)</option>
              {adapters.map((a) => (
                <option key={a} value={a}>
                  {a}
                </option>
              ))}
            </select>
          </label>
          <label className="field">
            <span>Prompt processing</span>
            <select
              value={draft.prefill_precision}
              onChange={(e) => update('prefill_precision', e.target.value as PrefillPrecision)}
            >
              <option value="f32">Exact (f32)</option>
              <option value="f16">Faster (f16)</option>
            </select>
            <small className="hint">
              Faster reads prompts up to about 1.5× as fast on GPUs with tensor cores, with replies a little
              further from the exact model. Applies from the next reply.
            </small>
          </label>
        </fieldset>

        <fieldset>
          <legend>Appearance</legend>
          <div className="radio-row" role="radiogroup" aria-label="Theme">
            {THEMES.map(([value, label]) => (
              <label key={value} className="radio">
                <input
                  type="radio"
                  name="theme"
                  value={value}
                  checked={draft.theme === value}
                  onChange={() => update('theme', value)}
                />
                {label}
              </label>
            ))}
          </div>
          <label className="field">
            <span>Font size: {draft.font_size}px</span>
            <input
              type="range"
              min={FONT_SIZES.min}
              max={FONT_SIZES.max}
              step={1}
              value={draft.font_size}
              onChange={(e) => update('font_size', Number(e.target.value))}
            />
          </label>
        </fieldset>

        <div className="form-actions">
          <button type="submit" className="primary-button" disabled={saving}>
            Save settings
          </button>
        </div>
      </form>

      <fieldset>
        <legend>Your chats</legend>
        <div className="button-row">
          <button type="button" className="small-button" onClick={() => void exportAll('markdown')}>
            Export all as Markdown
          </button>
          <button type="button" className="small-button" onClick={() => void exportAll('json')}>
            Export all as JSON
          </button>
          <button type="button" className="small-button" onClick={() => fileRef.current?.click()}>
            Import chats (JSON)…
          </button>
          <input
            ref={fileRef}
            type="file"
            accept=".json,application/json"
            className="visually-hidden"
            aria-label="Chats JSON file"
            tabIndex={-1}
            onChange={(e) => {
              const file = e.target.files?.[0];
              e.target.value = '';
              if (file) void importFile(file);
            }}
          />
        </div>
      </fieldset>
    </section>
  );
}
