import { memo, useEffect, useRef, useState, type KeyboardEvent } from 'react';
import { humanRate } from '../lib/format';
import { isComposing } from '../lib/keys';
import type { Message } from '../types';
import { BranchSwitcher } from './BranchSwitcher';
import { CopyButton } from './CopyButton';
import { Markdown } from './Markdown';
import { ThinkingBlock } from './ThinkingBlock';

interface Props {
  message: Message;
  siblings: Message[];
  /** This reply is the one being streamed. */
  streaming: boolean;
  /** Something in this chat is streaming (actions that start another stream are off). */
  busy: boolean;
  /** The last assistant message of the path: only it offers Regenerate. */
  canRegenerate: boolean;
  highlighted: boolean;
  onShowBranch: (message: Message) => void;
  onRegenerate: (message: Message) => void;
  onEdit: (message: Message, content: string) => void;
}

const STATUS_NOTE: Partial<Record<Message['status'], string>> = {
  incomplete: 'Stopped before the end.',
  error: 'The reply failed.',
};

function MessageItemView(props: Props) {
  const { message, siblings, streaming, busy, highlighted } = props;
  const [editing, setEditing] = useState(false);
  const ref = useRef<HTMLElement>(null);
  const index = Math.max(0, siblings.findIndex((m) => m.id === message.id));

  useEffect(() => {
    if (highlighted && typeof ref.current?.scrollIntoView === 'function') {
      ref.current.scrollIntoView({ block: 'center' });
    }
  }, [highlighted]);

  const isUser = message.role === 'user';
  const label = isUser ? 'You' : message.model ?? 'Assistant';
  const thinking = message.thinking ?? '';

  return (
    <article
      ref={ref}
      className={`message message-${message.role}${highlighted ? ' highlighted' : ''}${streaming ? ' streaming' : ''}`}
      data-testid={`message-${message.role}`}
      data-message-id={String(message.id)}
      aria-label={isUser ? 'Your message' : 'Reply'}
      // The reply being streamed is announced when it is complete (aria-busy holds it back).
      aria-live={streaming ? 'polite' : undefined}
      aria-busy={streaming || undefined}
    >
      <header className="message-header">
        <span className="message-author">{label}</span>
        <BranchSwitcher
          index={index}
          count={siblings.length}
          disabled={busy}
          onSelect={(i) => props.onShowBranch(siblings[i])}
        />
      </header>

      {!isUser && (thinking || (streaming && !message.content)) && (
        <ThinkingBlock text={thinking} active={streaming && !message.content} />
      )}

      {editing ? (
        <EditBox
          initial={message.content}
          onCancel={() => setEditing(false)}
          onSubmit={(text) => {
            setEditing(false);
            props.onEdit(message, text);
          }}
        />
      ) : isUser ? (
        <div className="message-text user-text">{message.content}</div>
      ) : (
        <div className="message-text">
          {message.content ? <Markdown text={message.content} /> : streaming ? null : <p className="muted">(empty reply)</p>}
          {streaming && !message.content && <span className="cursor" aria-hidden="true" />}
        </div>
      )}

      {!streaming && STATUS_NOTE[message.status] && (
        <p className={`status-note status-${message.status}`}>{STATUS_NOTE[message.status]}</p>
      )}

      {!editing && !streaming && (
        <footer className="message-actions">
          <CopyButton label="Copy message" getText={() => message.content} />
          {isUser && (
            <button type="button" className="small-button" aria-label="Edit message" disabled={busy} onClick={() => setEditing(true)}>
              Edit
            </button>
          )}
          {!isUser && props.canRegenerate && (
            <button
              type="button"
              className="small-button"
              data-testid="regenerate-button"
              aria-label="Regenerate reply"
              disabled={busy}
              onClick={() => props.onRegenerate(message)}
            >
              Regenerate
            </button>
          )}
          {!isUser && message.tok_s !== null && (
            <span className="message-meta">
              {humanRate(message.tok_s)}
              {message.reply_tokens !== null && ` · ${message.reply_tokens} tokens`}
            </span>
          )}
        </footer>
      )}
    </article>
  );
}

// While a reply streams, only that message changes; the others keep their objects, so this
// comparison lets a long chat skip re-rendering them on every token.
function sameProps(a: Props, b: Props): boolean {
  return (
    a.message === b.message &&
    a.streaming === b.streaming &&
    a.busy === b.busy &&
    a.canRegenerate === b.canRegenerate &&
    a.highlighted === b.highlighted &&
    a.onShowBranch === b.onShowBranch &&
    a.onRegenerate === b.onRegenerate &&
    a.onEdit === b.onEdit &&
    a.siblings.length === b.siblings.length &&
    a.siblings.every((m, i) => m.id === b.siblings[i].id)
  );
}

export const MessageItem = memo(MessageItemView, sameProps);

function EditBox({ initial, onSubmit, onCancel }: { initial: string; onSubmit: (t: string) => void; onCancel: () => void }) {
  const [text, setText] = useState(initial);
  const submit = () => {
    if (text.trim()) onSubmit(text);
  };
  const onKeyDown = (e: KeyboardEvent<HTMLTextAreaElement>) => {
    if (e.key === 'Escape') {
      e.stopPropagation();
      onCancel();
    } else if (e.key === 'Enter' && !e.shiftKey && !isComposing(e)) {
      e.preventDefault();
      submit();
    }
  };
  return (
    <div className="edit-box">
      <textarea
        aria-label="Edit your message"
        value={text}
        autoFocus
        rows={Math.min(12, Math.max(2, text.split('\n').length))}
        onChange={(e) => setText(e.target.value)}
        onKeyDown={onKeyDown}
      />
      <div className="edit-actions">
        <button type="button" className="primary-button" onClick={submit} disabled={!text.trim()}>
          Save and send
        </button>
        <button type="button" className="small-button" onClick={onCancel}>
          Cancel
        </button>
      </div>
    </div>
  );
}
