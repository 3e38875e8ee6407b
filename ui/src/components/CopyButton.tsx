import { useEffect, useState } from 'react';
import { copyText } from '../lib/clipboard';

interface Props {
  /** Read at click time, so a block still streaming copies what it shows then. */
  getText: () => string;
  label: string;
  className?: string;
}

export function CopyButton({ getText, label, className }: Props) {
  const [state, setState] = useState<'idle' | 'copied' | 'failed'>('idle');

  useEffect(() => {
    if (state === 'idle') return;
    const t = setTimeout(() => setState('idle'), 1500);
    return () => clearTimeout(t);
  }, [state]);

  return (
    <button
      type="button"
      className={`small-button ${className ?? ''}`}
      aria-label={label}
      onClick={() => copyText(getText()).then(() => setState('copied'), () => setState('failed'))}
    >
      {state === 'copied' ? 'Copied' : state === 'failed' ? 'Copy failed' : 'Copy'}
    </button>
  );
}
