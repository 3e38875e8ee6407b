import { useEffect, useRef } from 'react';
import { keyOf, siblingsOf, type MessageTree } from '../lib/tree';
import type { Id, Message } from '../types';
import { MessageItem } from './MessageItem';

interface Props {
  tree: MessageTree;
  path: Message[];
  streamingId: Id | null;
  busy: boolean;
  highlight: Id | null;
  onShowBranch: (m: Message) => void;
  onRegenerate: (m: Message) => void;
  onEdit: (m: Message, content: string) => void;
}

/** Distance from the bottom under which new text keeps the view pinned to the end. */
const STICKY_PX = 80;

export function MessageList({ tree, path, streamingId, busy, highlight, ...actions }: Props) {
  const scroller = useRef<HTMLDivElement>(null);
  const atBottom = useRef(true);
  const visible = path.filter((m) => m.role !== 'system');
  const lastAssistant = [...visible].reverse().find((m) => m.role === 'assistant');
  const tail = visible[visible.length - 1];

  // Follow a growing reply, unless the user has scrolled up to read.
  useEffect(() => {
    const el = scroller.current;
    if (el && atBottom.current && highlight === null) el.scrollTop = el.scrollHeight;
  }, [tail?.content, tail?.thinking, visible.length, highlight]);

  return (
    <div
      className="message-list"
      ref={scroller}
      onScroll={(e) => {
        const el = e.currentTarget;
        atBottom.current = el.scrollHeight - el.scrollTop - el.clientHeight < STICKY_PX;
      }}
    >
      {visible.map((m) => (
        <MessageItem
          key={keyOf(m.id)}
          message={m}
          siblings={siblingsOf(tree, m)}
          streaming={streamingId !== null && keyOf(streamingId) === keyOf(m.id)}
          busy={busy}
          canRegenerate={m === lastAssistant}
          highlighted={highlight !== null && keyOf(highlight) === keyOf(m.id)}
          {...actions}
        />
      ))}
    </div>
  );
}
