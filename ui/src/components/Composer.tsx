import { forwardRef, useState, type KeyboardEvent } from 'react';
import { isComposing } from '../lib/keys';

interface Props {
  streaming: boolean;
  stopping: boolean;
  disabled: boolean;
  placeholder: string;
  /** Resolves true when the message was accepted; the text is kept otherwise. */
  onSend: (text: string) => Promise<boolean>;
  onStop: () => void;
}

export const Composer = forwardRef<HTMLTextAreaElement, Props>(function Composer(props, ref) {
  const { streaming, stopping, disabled, placeholder } = props;
  const [text, setText] = useState('');
  const canSend = !streaming && !disabled && text.trim().length > 0;

  const send = async () => {
    if (!canSend) return;
    const sent = text;
    setText('');
    const ok = await props.onSend(sent);
    if (!ok) setText((t) => t || sent);
  };

  const onKeyDown = (e: KeyboardEvent<HTMLTextAreaElement>) => {
    if (e.key !== 'Enter' || e.shiftKey || isComposing(e)) return;
    e.preventDefault();
    void send();
  };

  return (
    <form
      className="composer"
      onSubmit={(e) => {
        e.preventDefault();
        void send();
      }}
    >
      <textarea
        ref={ref}
        data-testid="composer-input"
        aria-label="Message"
        placeholder={placeholder}
        value={text}
        rows={Math.min(10, Math.max(1, text.split('\n').length))}
        onChange={(e) => setText(e.target.value)}
        onKeyDown={onKeyDown}
      />
      {streaming ? (
        <button
          type="button"
          className="stop-button"
          data-testid="stop-button"
          aria-label="Stop generating (Esc)"
          disabled={stopping}
          onClick={props.onStop}
        >
          {stopping ? 'Stopping…' : 'Stop'}
        </button>
      ) : (
        <button type="submit" className="primary-button" data-testid="send-button" aria-label="Send message" disabled={!canSend}>
          Send
        </button>
      )}
    </form>
  );
});
