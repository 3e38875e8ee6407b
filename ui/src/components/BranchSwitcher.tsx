interface Props {
  index: number;
  count: number;
  onSelect: (index: number) => void;
  disabled?: boolean;
}

/** ‹ 2/3 › between the versions of a message (edits and regenerations). */
export function BranchSwitcher({ index, count, onSelect, disabled }: Props) {
  if (count < 2) return null;
  return (
    <div className="branch-switcher" role="group" aria-label="Versions">
      <button
        type="button"
        className="icon-button"
        aria-label="Previous version"
        disabled={disabled || index === 0}
        onClick={() => onSelect(index - 1)}
      >
        ‹
      </button>
      <span className="branch-count" aria-label={`Version ${index + 1} of ${count}`}>
        {index + 1}/{count}
      </span>
      <button
        type="button"
        className="icon-button"
        aria-label="Next version"
        disabled={disabled || index === count - 1}
        onClick={() => onSelect(index + 1)}
      >
        ›
      </button>
    </div>
  );
}
