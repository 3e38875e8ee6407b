import { useId, useState } from 'react';
import { Markdown } from './Markdown';

interface Props {
  text: string;
  /** True while the model is still thinking (no answer text yet). */
  active: boolean;
}

/** The model's reasoning, collapsed unless it is being written or the user opens it. */
export function ThinkingBlock({ text, active }: Props) {
  const [choice, setChoice] = useState<boolean | null>(null);
  const open = choice ?? active;
  const regionId = useId();
  return (
    <div className="thinking">
      <button
        type="button"
        className="thinking-toggle"
        aria-expanded={open}
        aria-controls={regionId}
        onClick={() => setChoice(!open)}
      >
        <span className="chevron" aria-hidden="true">{open ? '▾' : '▸'}</span>
        {active ? 'Thinking…' : 'Thoughts'}
      </button>
      {open && (
        <div id={regionId} className="thinking-body" role="region" aria-label="Model thoughts">
          <Markdown text={text} />
        </div>
      )}
    </div>
  );
}
