import { humanContext, humanRate } from '../lib/format';
import type { GenerationStats } from '../types';

interface Props {
  stats: GenerationStats | null;
  streaming: boolean;
}

/** Speed, token counts and how full the context is, for the reply streaming or just finished. */
export function StatsBar({ stats, streaming }: Props) {
  if (!stats) return <div className="stats-bar" aria-hidden="true" />;
  const used = stats.context_max > 0 ? Math.min(stats.context_used, stats.context_max) : stats.context_used;
  const percent = stats.context_max > 0 ? Math.round((100 * used) / stats.context_max) : 0;
  return (
    <div className="stats-bar" data-testid="stats-bar">
      <span className="stat" aria-label="Speed">{humanRate(stats.tok_s)}</span>
      <span className="stat">prompt {stats.prompt_tokens} · reply {stats.reply_tokens} tokens</span>
      {stats.context_max > 0 && (
      <span className="stat context-stat">
        <label htmlFor="context-meter">Context</label>
        <meter
          id="context-meter"
          min={0}
          max={stats.context_max}
          low={(stats.context_max) * 0.75}
          high={(stats.context_max) * 0.9}
          optimum={0}
          value={used}
          aria-valuetext={`${percent}% of the context used`}
        />
        <span>
          {humanContext(used) || used} / {humanContext(stats.context_max) || stats.context_max} ({percent}%)
        </span>
      </span>
      )}
      {streaming && <span className="stat live-dot" aria-hidden="true" />}
    </div>
  );
}
