import { useState, type KeyboardEvent } from 'react';
import type { ChatSummary } from '../types';

interface Props {
  chat: ChatSummary;
  active: boolean;
  onOpen: () => void;
  onRename: (title: string) => void;
  onDelete: () => void;
  onPin: (pinned: boolean) => void;
}

export function ChatListItem({ chat, active, onOpen, onRename, onDelete, onPin }: Props) {
  const [mode, setMode] = useState<'view' | 'rename' | 'confirm-delete'>('view');
  const [title, setTitle] = useState(chat.title);
  const name = chat.title || 'Untitled chat';

  const commit = () => {
    const t = title.trim();
    setMode('view');
    if (t && t !== chat.title) onRename(t);
  };
  const onKeyDown = (e: KeyboardEvent<HTMLInputElement>) => {
    if (e.key === 'Enter') commit();
    else if (e.key === 'Escape') {
      e.stopPropagation();
      setTitle(chat.title);
      setMode('view');
    }
  };

  return (
    <li className={`chat-item${active ? ' active' : ''}${chat.pinned ? ' pinned' : ''}`} data-testid="chat-list-item">
      {mode === 'rename' ? (
        <input
          className="rename-input"
          aria-label="Chat title"
          value={title}
          autoFocus
          onChange={(e) => setTitle(e.target.value)}
          onKeyDown={onKeyDown}
          onBlur={commit}
        />
      ) : (
        <button type="button" className="chat-open" aria-current={active ? 'page' : undefined} onClick={onOpen}>
          {chat.pinned && <span className="visually-hidden">Pinned: </span>}
          <span className="chat-title">{name}</span>
          {chat.last_message && <span className="chat-preview">{chat.last_message}</span>}
        </button>
      )}
      {mode === 'confirm-delete' ? (
        <div className="chat-actions confirm">
          <button type="button" className="danger-button" aria-label={`Confirm delete ${name}`} onClick={onDelete}>
            Delete
          </button>
          <button type="button" className="small-button" aria-label="Keep chat" onClick={() => setMode('view')}>
            Keep
          </button>
        </div>
      ) : (
        mode === 'view' && (
          <div className="chat-actions">
            <button
              type="button"
              className="icon-button"
              aria-label={chat.pinned ? `Unpin ${name}` : `Pin ${name}`}
              aria-pressed={chat.pinned}
              onClick={() => onPin(!chat.pinned)}
            >
              {chat.pinned ? '★' : '☆'}
            </button>
            <button
              type="button"
              className="icon-button"
              aria-label={`Rename ${name}`}
              onClick={() => {
                setTitle(chat.title);
                setMode('rename');
              }}
            >
              ✎
            </button>
            <button type="button" className="icon-button" aria-label={`Delete ${name}`} onClick={() => setMode('confirm-delete')}>
              🗑
            </button>
          </div>
        )
      )}
    </li>
  );
}
