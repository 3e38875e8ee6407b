import { useNotices } from '../hooks/useNotices';

export function Notices() {
  const { notices, dismiss } = useNotices();
  return (
    <div className="notices">
      {notices.map((n) => (
        <div key={n.id} className={`notice notice-${n.kind}`} role={n.kind === 'error' ? 'alert' : 'status'}>
          <span className="notice-text">{n.text}</span>
          <button type="button" className="icon-button" aria-label="Dismiss" onClick={() => dismiss(n.id)}>
            ×
          </button>
        </div>
      ))}
    </div>
  );
}
