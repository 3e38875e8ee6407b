import { useEffect, useRef, useState } from 'react';
import { humanBytes, humanContext, humanCount } from '../lib/format';
import { describeProblem, problemOf } from '../lib/problems';
import type { LoadedModel, LoadProgress, ModelEntry } from '../types';

interface Props {
  models: ModelEntry[];
  current: LoadedModel | null;
  loading: { name: string; progress: LoadProgress } | null;
  onLoad: (name: string) => void;
  onUnload: () => void;
  onImport: () => void;
  onForget: (name: string) => void;
  onOpen?: () => void;
}

export function CapabilityBadges({ capabilities }: { capabilities: readonly string[] }) {
  return (
    <span className="badges">
      {capabilities.map((c) => (
        <span key={c} className={`badge badge-${c}`}>
          {c}
        </span>
      ))}
    </span>
  );
}

function details(m: ModelEntry): string {
  return [
    m.family ?? m.architecture,
    m.parameter_size ?? humanCount(m.parameters),
    m.quantization,
    humanBytes(m.size),
    m.context_length ? `${humanContext(m.context_length)} context` : null,
  ]
    .filter(Boolean)
    .join(' · ');
}

/** The button naming the loaded model, and a popover listing the catalog. */
export function ModelPicker(props: Props) {
  const { models, current, loading } = props;
  const [open, setOpen] = useState(false);
  const rootRef = useRef<HTMLDivElement>(null);

  useEffect(() => {
    if (!open) return;
    const onDown = (e: MouseEvent) => {
      if (rootRef.current && !rootRef.current.contains(e.target as Node)) setOpen(false);
    };
    document.addEventListener('mousedown', onDown);
    return () => document.removeEventListener('mousedown', onDown);
  }, [open]);

  const toggle = () => {
    if (!open) props.onOpen?.();
    setOpen(!open);
  };

  const label = loading ? `Loading ${loading.name}…` : current ? current.name : 'Choose a model';

  return (
    <div
      className="model-picker"
      ref={rootRef}
      onKeyDown={(e) => {
        if (e.key === 'Escape' && open) {
          e.stopPropagation();
          setOpen(false);
        }
      }}
    >
      <button
        type="button"
        className="model-picker-button"
        data-testid="model-picker"
        aria-haspopup="dialog"
        aria-expanded={open}
        onClick={toggle}
      >
        <span className="model-picker-label">{label}</span>
        {current && !loading && <CapabilityBadges capabilities={current.capabilities} />}
        <span aria-hidden="true">▾</span>
      </button>

      {loading && (
        <div className="load-progress">
          <progress aria-label={`Loading ${loading.name}`} max={1} value={loading.progress.fraction} />
          <span className="load-stage">
            {loading.progress.stage} {Math.round(loading.progress.fraction * 100)}%
          </span>
        </div>
      )}

      {open && (
        <div className="model-menu" role="dialog" aria-label="Models">
          {models.length === 0 && (
            <p className="muted empty-models">
              No models found. Pull one with Ollama (for example <code>ollama pull gemma3:270m</code>) or import a GGUF file.
            </p>
          )}
          <ul className="model-list">
            {models.map((m) => {
              const problem = problemOf(m);
              const isCurrent = current?.name === m.name;
              return (
                <li key={m.name} className={`model-row${problem ? ' broken' : ''}`}>
                  <button
                    type="button"
                    className="model-option"
                    data-testid={`model-option-${m.name}`}
                    disabled={problem !== null || loading !== null}
                    aria-current={isCurrent || undefined}
                    onClick={() => {
                      setOpen(false);
                      if (!isCurrent) props.onLoad(m.name);
                    }}
                  >
                    <span className="model-name">
                      {m.name}
                      {isCurrent && <span className="loaded-tag">loaded</span>}
                    </span>
                    <span className="model-details">{details(m)}</span>
                    {problem ? (
                      <span className="model-problem">Can't be used: {describeProblem(problem)}</span>
                    ) : (
                      <CapabilityBadges capabilities={m.capabilities} />
                    )}
                  </button>
                  {m.source === 'imported' && (
                    <button
                      type="button"
                      className="icon-button"
                      aria-label={`Remove ${m.name} from the list`}
                      title="Remove from the list (the file is kept)"
                      onClick={() => props.onForget(m.name)}
                    >
                      ×
                    </button>
                  )}
                </li>
              );
            })}
          </ul>
          <div className="model-menu-actions">
            <button
              type="button"
              className="small-button"
              onClick={() => {
                setOpen(false);
                props.onImport();
              }}
            >
              Import GGUF…
            </button>
            {current && (
              <button
                type="button"
                className="small-button"
                onClick={() => {
                  setOpen(false);
                  props.onUnload();
                }}
              >
                Unload {current.name}
              </button>
            )}
          </div>
        </div>
      )}
    </div>
  );
}
